"""JSON text for large documents (``compare --json`` of two 100 000-result runs, a baseline
file): indented down to ``flat_from`` levels, each value deeper on one line of its own.

Python's ``json`` module encodes in C only without ``indent``: an indented document of
100 000 entries is encoded in pure Python, several times slower. Here the outer levels are
indented by hand and every deeper value (a list entry, a baseline entry) is written by one
C encoder made once: the same value when parsed, readable line by line, and fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from json import encoder as _encoder
from typing import Any

_SCALARS = (str, int, float, bool, type(None))
_PLAIN = frozenset(_SCALARS)  # those types exactly (a subclass goes the long way)


class Raw(str):
    """A value's JSON text, made by the caller: written as it is (one line)."""


def _one_line(default: Callable[[Any], Any] | None, allow_nan: bool) -> Callable[[Any], str]:
    """A value on one line, as ``json.dumps(value, default=..., allow_nan=...)`` writes it."""
    make = getattr(_encoder, "c_make_encoder", None)
    plain = json.JSONEncoder(default=default or _no_default, allow_nan=allow_nan)
    if make is None:  # a Python built without the C accelerator
        return plain.encode
    # The encoder json.dumps makes on every call, made once (markers None: no cycle check;
    # a value torchport writes holds no cycle).
    fast = make(
        None,
        plain.default,
        _encoder.encode_basestring_ascii,
        None,
        ": ",
        ", ",
        False,
        False,
        allow_nan,
    )

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return _encoder.encode_basestring_ascii(value)
        return "".join(fast(value, 0))

    return encode


def one_line(
    default: Callable[[Any], Any] | None = None, allow_nan: bool = True
) -> Callable[[Any], str]:
    """The encoder ``iter_json`` writes each value at ``flat_from`` and deeper with (the same
    options): a caller that makes entries' text apart (in forked children, two cores at
    once) gives them back as ``Raw``."""
    return _one_line(default, allow_nan)


def _no_default(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


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
    ``json.dumps``); a ``Raw`` value is the caller's text, written as it is."""
    encode = _one_line(default, allow_nan)

    def walk(value: Any, depth: int) -> Iterator[str]:
        if type(value) is Raw:
            yield value
            return
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
        is_dict = isinstance(value, dict)
        yield "{" if is_dict else "["
        flat = depth + 1 >= flat_from
        items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        for k, (key, item) in enumerate(items):
            head = (pad if k == 0 else "," + pad) + (encode(_key(key)) + ": " if is_dict else "")
            if type(item) is Raw:
                yield head + item
            elif flat or isinstance(item, _SCALARS):
                yield head + encode(item)  # one piece a line: no generator per entry
            else:
                yield head
                yield from walk(item, depth + 1)
        yield "\n" + " " * (indent * depth) + ("}" if is_dict else "]")

    return walk(data, 0)


def indented(data: Any, *, indent: int = 2, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(data, indent=indent, default=default)``, the same text, made faster: every
    dict or list whose values are all scalars (a gate's 26 000 findings of two runs of
    100 000 results) is written by one C encoder call, whose item separator carries the
    line break and the indentation of its depth; the levels above are walked here.
    ``json.dumps`` with an indent encodes everything in pure Python: a gate's 7.6 MB took
    0.19 s of CPU with it, 0.11 s with this, 0.09 s without an indent (one C call). A
    ``Raw`` value is the caller's text (``indented_at``), written as it is."""
    if getattr(_encoder, "c_make_encoder", None) is None:  # Python without the C accelerator
        return json.dumps(data, indent=indent, default=default)
    pieces: list[str] = []
    _indenter(indent, default)(data, 0, pieces)
    return "".join(pieces)


def indented_at(
    depth: int, *, indent: int = 2, default: Callable[[Any], Any] | None = None
) -> Callable[[Any], str]:
    """The text ``indented`` (the same options) writes for a value at ``depth``, a list's
    entry there: made by a caller apart (in forked children, two cores at once) and given
    back as ``Raw``, the document is the same."""
    if getattr(_encoder, "c_make_encoder", None) is None:
        pad = "\n" + " " * (indent * depth)
        return lambda value: json.dumps(value, indent=indent, default=default).replace("\n", pad)
    walk = _indenter(indent, default)

    def text(value: Any) -> str:
        pieces: list[str] = []
        walk(value, depth, pieces)
        return "".join(pieces)

    return text


def _indenter(
    indent: int, default: Callable[[Any], Any] | None
) -> Callable[[Any, int, list[str]], None]:
    """``indented``'s walk: a value at a depth, its pieces added to a list."""
    make = _encoder.c_make_encoder  # type: ignore[attr-defined]
    one = _one_line(default, True)
    plain = json.JSONEncoder(default=default or _no_default)
    flat: dict[int, tuple[Callable[..., Any], str, str]] = {}

    def flat_at(depth: int) -> tuple[Callable[..., Any], str, str]:
        """The C encoder of a flat container at ``depth``, its items' padding and its end's."""
        if depth not in flat:
            pad = "\n" + " " * (indent * (depth + 1))
            fast = make(
                None,
                plain.default,
                _encoder.encode_basestring_ascii,
                None,
                ": ",
                "," + pad,
                False,
                False,
                True,
            )
            flat[depth] = fast, pad, "\n" + " " * (indent * depth)
        return flat[depth]

    def walk(value: Any, depth: int, pieces: list[str]) -> None:
        if type(value) is Raw:
            pieces.append(value)
            return
        if isinstance(value, _SCALARS):
            pieces.append(one(value))
            return
        if isinstance(value, list | tuple):
            items: Any = value
        elif isinstance(value, dict):
            items = value.values()
        elif default is None:
            pieces.append(one(value))  # the encoder's own TypeError
            return
        else:
            walk(default(value), depth, pieces)
            return
        if not value:
            pieces.append("{}" if isinstance(value, dict) else "[]")
            return
        if all(isinstance(item, _SCALARS) and type(item) is not Raw for item in items):
            fast, pad, end = flat_at(depth)
            text = "".join(fast(value, 0))  # "{" items "}", items apart by "," and the pad
            pieces.append(text[0] + pad + text[1:-1] + end + text[-1])
            return
        pad = "\n" + " " * (indent * (depth + 1))
        if isinstance(value, dict):
            pieces.append("{")
            for k, (key, item) in enumerate(value.items()):
                pieces.append((pad if k == 0 else "," + pad) + one(_dict_key(key, one)) + ": ")
                walk(item, depth + 1, pieces)
            pieces.append("\n" + " " * (indent * depth) + "}")
            return
        pieces.append("[")
        fast, item_pad, item_end = flat_at(depth + 1)
        for k, item in enumerate(value):
            pieces.append(pad if k == 0 else "," + pad)
            # a flat dict of plain values (a gate's finding) here, without a call of walk
            if type(item) is dict and item and all(type(v) in _PLAIN for v in item.values()):
                text = "".join(fast(item, 0))
                pieces.append("{" + item_pad + text[1:-1] + item_end + "}")
            else:
                walk(item, depth + 1, pieces)
        pieces.append("\n" + " " * (indent * depth) + "]")

    return walk


def _dict_key(key: Any, one: Callable[[Any], str]) -> str:
    """A dict key as ``json.dumps`` makes it text (its TypeError for any other key)."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return one(key)  # repr, or NaN and Infinity
    if key is True or key is False or key is None:
        return one(key)
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


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
