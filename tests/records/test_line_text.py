"""An export line put together from stored texts (records/line_text.py) parses to what
``result_line`` makes of the same values, for any values the writer stores."""

import json
import math
import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from torchport.kb.exchange import result_line
from torchport.kb.sql_common import to_json
from torchport.records import line_text

TEXT = st.text()  # any unicode, quotes, backslashes and control characters included
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | TEXT
TREES = st.recursive(
    SCALARS, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(TEXT, kids, max_size=3)
)
NUMBERS = st.dictionaries(TEXT, st.integers(-(2**63), 2**63 - 1) | st.floats(), max_size=4)
OBJECTS = st.dictionaries(TEXT, TREES, max_size=4)
OPS = st.lists(
    st.tuples(TEXT, TEXT, st.integers(0, 2**63 - 1), st.sampled_from([0, 1])), max_size=3
)
VALID = sqlite3.connect(":memory:")


def _json_valid(text: str) -> bool:
    return bool(VALID.execute("SELECT json_valid(?)", (text,)).fetchone()[0])


@given(
    case=TEXT,
    case_version=st.integers(0, 2**63 - 1),
    mode=TEXT,
    status=TEXT,
    stage=st.none() | TEXT,
    grade=st.none() | TEXT,
    metrics=NUMBERS,
    findings=OBJECTS,
    durations=NUMBERS,
    artifacts=st.lists(TEXT, max_size=3),
    probe_versions=OBJECTS,
    error=st.none() | st.tuples(st.none() | TEXT, st.none() | TEXT, st.none() | TEXT),
    times=st.tuples(st.none() | TEXT, TEXT),
    ops=OPS,
    run_id=TEXT,
)
def test_a_line_parses_to_the_result_line_of_its_values(
    case,
    case_version,
    mode,
    status,
    stage,
    grade,
    metrics,
    findings,
    durations,
    artifacts,
    probe_versions,
    error,
    times,
    ops,
    run_id,
):
    stored = {
        "artifacts": to_json(artifacts, "artifacts"),
        "durations": to_json(durations, "durations"),
        "findings": to_json(findings, "findings"),
        "metrics": to_json(metrics, "metrics"),
        "probe_versions": to_json(probe_versions, "probe_versions"),
    }
    error_type, error_message, traceback = error or (None, None, None)
    plain = all(_json_valid(text) for text in stored.values())
    row = (
        plain,
        1,
        case,
        case_version,
        mode,
        status,
        stage,
        grade,
        *stored.values(),
        error_type,
        error_message,
        traceback,
        *times,
    )
    text = line_text.line(run_id, row, ops)
    if text is None:  # the database refuses NaN and Infinity: the caller writes this row
        assert not plain
        return
    missing = error_type is None and error_message is None
    expected = result_line(
        run_id,
        {
            "case": case,
            "case_version": case_version,
            "mode": mode,
            "status": status,
            "stage": stage,
            "grade": grade,
            "metrics": metrics,
            "findings": findings,
            "durations": durations,
            "artifacts": artifacts,
            "probe_versions": probe_versions,
            "error": None
            if missing
            else {"type": error_type, "message": error_message, "traceback": traceback},
            "started_at": times[0],
            "finished_at": times[1],
            "ops": line_text.op_dicts(ops),
        },
    )
    # as canonical text: NaN is not equal to itself (json.loads keeps a NaN the text holds)
    assert _canonical(json.loads(text)) == _canonical(expected)


def test_nan_is_left_to_the_caller():
    row = (False, 1, "c", 1, "eager", "pass", None, None, "[]", "{}", "{}", '{"x": NaN}', "{}")
    assert line_text.line("r", (*row, None, None, None, None, "t"), None) is None
    assert math.isnan(json.loads('{"x": NaN}')["x"])


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True)
