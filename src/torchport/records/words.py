"""Lists in a sentence: the first few names, then how many more ("a, b, c, d (+3 more)"), the
one wording every message, note and view uses."""

from __future__ import annotations

SHOWN = 4  # names listed before "(+N more)"


def listed(names: list[str], shown: int = SHOWN) -> str:
    """``names`` joined with ", ", the first ``shown`` of them, then "(+N more)"."""
    rest = len(names) - shown
    return ", ".join(names[:shown]) + (f" (+{rest} more)" if rest > 0 else "")
