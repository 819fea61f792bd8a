"""User-facing layers: the CLI and the views it renders. No torch at import time."""
