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
