"""interfaces/json_text.py: the large documents' JSON (compare --json, a baseline file) parses
to the same value as json.dumps writes, with the outer levels indented and each deeper value on
one line."""

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from torchport.interfaces.json_text import dumps

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(JSON, st.integers(0, 4))
def test_any_value_parses_back_to_itself(value, flat_from):
    assert json.loads(dumps(value, indent=2, flat_from=flat_from)) == value


def test_outer_levels_are_indented_and_each_entry_is_one_line():
    data = {"run_a": {"id": "a"}, "perf": [{"case": "x", "ratio": 1.5}, {"case": "y"}], "n": 3}
    text = dumps(data, indent=2, flat_from=2)
    assert text.splitlines() == [
        "{",
        '  "run_a": {',
        '    "id": "a"',
        "  },",
        '  "perf": [',
        '    {"case": "x", "ratio": 1.5},',
        '    {"case": "y"}',
        "  ],",
        '  "n": 3',
        "}",
    ]
    assert dumps({"a": [], "b": {}}, flat_from=2) == '{\n  "a": [],\n  "b": {}\n}'


def test_keys_defaults_and_nan_as_json_dumps_writes_them():
    class Thing:
        def to_dict(self):
            return {"k": (1, 2)}

    data = {1: Thing(), None: math.inf, False: [Thing()], 2.5: "x"}
    expected = json.dumps(data, default=lambda v: v.to_dict())
    assert json.loads(dumps(data, default=lambda v: v.to_dict())) == json.loads(expected)


KEYS = st.text() | st.integers() | st.floats() | st.booleans() | st.none()
ANY = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too: json.dumps writes NaN, Infinity
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(KEYS, inner, max_size=5)
        | st.builds(lambda v: Thing(v), inner)
    ),
    max_leaves=40,
)


class Thing:
    """A value JSON cannot write but ``default`` can."""

    def __init__(self, value):
        self.value = value


def _default(value):
    if isinstance(value, Thing):
        return {"thing": value.value}
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


@given(ANY, st.integers(0, 4))
def test_indented_is_the_text_json_dumps_writes(value, indent):
    """``indented`` (every ``--json`` the CLI writes whole) is json.dumps(indent=...)'s text,
    byte for byte, whatever the value: flat containers by the C encoder, the rest walked."""
    from torchport.interfaces.json_text import indented

    expected = json.dumps(value, indent=indent, default=_default)
    assert indented(value, indent=indent, default=_default) == expected


@given(st.sampled_from([{(1, 2): 1}, {"a": {(1,): [1]}}, [object()], {"a": [1, {"b": object()}]}]))
def test_indented_refuses_what_json_dumps_refuses(value):
    import pytest

    from torchport.interfaces.json_text import indented

    with pytest.raises(TypeError) as ours:
        indented(value)
    with pytest.raises(TypeError) as theirs:
        json.dumps(value, indent=2)
    assert str(ours.value) == str(theirs.value)


@given(st.dictionaries(st.text(), st.lists(ANY, max_size=5), max_size=4), st.integers(0, 4))
def test_entries_made_apart_make_the_same_document(lists, indent):
    """A gate's or a comparison's list entries made text apart (``indented_at`` their depth,
    ``one_line``; in forked children) and given back as ``Raw``: the document is the text
    json.dumps writes (indented) or the one ``dumps`` writes (flat from the entries)."""
    from torchport.interfaces.json_text import Raw, indented, indented_at, one_line

    entry = indented_at(2, indent=indent, default=_default)
    made = {name: [Raw(entry(v)) for v in items] for name, items in lists.items()}
    assert indented(made, indent=indent, default=_default) == json.dumps(
        lists, indent=indent, default=_default
    )
    line = one_line(default=_default)
    flat = {name: [Raw(line(v)) for v in items] for name, items in lists.items()}
    assert dumps(flat, indent=indent, flat_from=2, default=_default) == dumps(
        lists, indent=indent, flat_from=2, default=_default
    )
