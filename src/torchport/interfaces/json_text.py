"""JSON text for large documents (``compare --json`` of two 100 000-result runs, a baseline
file): indented down to ``flat_from`` levels, each value deeper on one line of its own.

Python's ``json`` module encodes in C only without ``indent``: an indented document of
100 000 entries is encoded in pure Python, several times slower. Here the outer levels are
indented by hand and every deeper value (a list entry, a baseline entry) is one call of the C
encoder: the same value when parsed, readable line by line, and fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

_SCALARS = (str, int, float, bool, type(None))


def iter_json(
    data: Any,
    *,
    indent: int = 2,
    flat_from: int = 2,
    default: Callable[[Any], Any] | None = None,
    allow_nan: bool = True,
) -> Iterator[str]:
    """Pieces of ``data``'s JSON text: dicts and lists above depth ``flat_from`` indented by
    ``indent``, anything at that depth or deeper on one line (``default``, ``allow_nan``: as
    ``json.dumps``)."""
    encode = json.JSONEncoder(default=default, allow_nan=allow_nan).encode  # C, one line

    def walk(value: Any, depth: int) -> Iterator[str]:
        if depth >= flat_from or isinstance(value, _SCALARS):
            yield encode(value)
            return
        if not isinstance(value, dict | list | tuple):
            if default is None:
                yield encode(value)  # the encoder's own TypeError
                return
            yield from walk(default(value), depth)
            return
        if not value:
            yield "{}" if isinstance(value, dict) else "[]"
            return
        pad = "\n" + " " * (indent * (depth + 1))
        opened, closed = ("{", "}") if isinstance(value, dict) else ("[", "]")
        yield opened
        first = True
        items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        for key, item in items:
            yield pad if first else "," + pad
            first = False
            if key is not None or isinstance(value, dict):
                yield encode(_key(key)) + ": "
            yield from walk(item, depth + 1)
        yield "\n" + " " * (indent * depth) + closed

    return walk(data, 0)


def _key(key: Any) -> str:
    """A dict key as ``json.dumps`` writes it (numbers, booleans and None become text)."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return json.dumps(key)
    return str(key) if isinstance(key, int) else json.dumps(key)


def dumps(data: Any, **options: Any) -> str:
    """``iter_json``'s pieces joined."""
    return "".join(iter_json(data, **options))
