"""Paging parameters as the CLI and the dashboard take them: whole numbers in a range the
store can hold, or one line that says what to give instead."""

from __future__ import annotations

# Far past any knowledge base's row count, far below SQLite's 64-bit integers.
MAX_OFFSET = 10**9
MAX_LIMIT = 10**6


class BadPaging(ValueError):
    """A paging value that is not a whole number in range (CLI: exit 2; web: HTTP 400)."""


def parse_offset(raw: object, name: str = "offset", *, most: int = MAX_OFFSET) -> int:
    """``raw`` (a query parameter's text, an option's int, or None for 0) as an offset."""
    if raw is None or raw == "":
        return 0
    if isinstance(raw, bool):
        raise BadPaging(f"{name} must be a whole number from 0 to {most}; got {raw!r}")
    if isinstance(raw, str):
        text = raw.strip()
        if not (text.isascii() and text.isdigit()) or len(text) > 12:
            raise BadPaging(f"{name} must be a whole number from 0 to {most}; got {raw[:40]!r}")
        raw = int(text)
    if not isinstance(raw, int) or not 0 <= raw <= most:
        raise BadPaging(f"{name} must be a whole number from 0 to {most}; got {raw!r}")
    return raw
