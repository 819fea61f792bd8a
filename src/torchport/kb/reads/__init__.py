"""One module per question the tool asks of a knowledge base (docs/where-rules-live.md)."""
