"""Each comparison rule is declared once (records/figures.py FIGURE_RULES): the SQL condition
made from it (queries.figure_past) decides exactly what its Python predicate decides."""

from __future__ import annotations

import itertools
import json
import math
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import pg
from torchport.kb import queries
from torchport.records.dialect import SQLITE
from torchport.records.figures import (
    FIGURE_RULES,
    KEY_FIGURES,
    OUTCOME_FIGURES,
    PARITY_LINE,
    PLACEMENT_RULE,
    FigureRule,
    metric_value,
)
from torchport.views.compare import LINES

VALUES = (None, 0, 0.0, -2.0, -1.0, 1e-9, 0.5, 1.0, 1.1, 1.15, 1.3, 2, 10.0, 20.0, math.nan)


def _sql_decides(conn, rule, x, y, line: float) -> bool:
    cond = queries.figure_past(rule)
    if rule.column:  # the figure's own column
        sides = f"(SELECT :x AS {rule.figure}) AS a, (SELECT :y AS {rule.figure}) AS b"
        params = {"x": x, "y": y}
    else:  # a figure without a column: read out of the metrics JSON
        sides = "(SELECT :x AS metrics) AS a, (SELECT :y AS metrics) AS b"
        params = {
            side: json.dumps({} if v is None or v != v else {rule.figure: v})
            for side, v in (("x", x), ("y", y))
        }
    sql = f"SELECT CASE WHEN {cond} THEN 1 ELSE 0 END FROM {sides}"
    return bool(conn.execute(sql, {**params, rule.line: line}).fetchone()[0])


@pytest.mark.parametrize("rule", FIGURE_RULES, ids=lambda r: r.figure)
def test_the_sql_and_the_python_of_a_rule_agree(rule):
    from torchport.kb.sqlite_schema import register_functions

    conn = sqlite3.connect(":memory:")
    register_functions(conn)  # as every store connection: torchport_metric
    decided = 0
    for x, y, line in itertools.product(VALUES, VALUES, (rule.default, 1.0, 2.0)):
        python = rule.past(x, y, line)
        assert _sql_decides(conn, rule, x, y, line) == python, (x, y, line)
        decided += python
    assert decided  # the grid holds pairs past the line, not only pairs short of it


def test_every_rule_is_a_figure_an_outcome_carries_with_a_line_the_views_use():
    """A rule's figure is a key figure (its column) or read from the metrics document; an
    outcome row carries it either way."""
    assert {r.figure for r in FIGURE_RULES} <= set(OUTCOME_FIGURES)
    assert OUTCOME_FIGURES[: len(KEY_FIGURES)] == KEY_FIGURES
    assert all(LINES[r.option] == r.default for r in FIGURE_RULES)
    decisions = queries.compare_decisions()
    assert [r.figure for r in FIGURE_RULES] == [n for n in decisions if n in OUTCOME_FIGURES]


def test_the_sql_and_the_python_of_a_status_rule_agree():
    """Each status list (records/figures.py STATUS_RULES) is declared once: its SQL and its
    Python predicate agree on every pair of (status, stage), stage NULL included."""
    from torchport.records.figures import STATUS_RULES

    conn = sqlite3.connect(":memory:")
    sides = [(s, t) for s in ("pass", "eager_fail", "crash") for t in (None, "run", "parity")]
    for rule in STATUS_RULES:
        held = 0
        for (sa, ta), (sb, tb) in itertools.product(sides, sides):
            sql = (
                f"SELECT CASE WHEN {rule.sql(SQLITE)} THEN 1 ELSE 0 END FROM"
                " (SELECT :sa AS status, :ta AS stage) AS a,"
                " (SELECT :sb AS status, :tb AS stage) AS b"
            )
            got = conn.execute(sql, {"sa": sa, "ta": ta, "sb": sb, "tb": tb}).fetchone()[0]
            assert bool(got) == rule.holds(sa, ta, sb, tb), (rule.name, sa, ta, sb, tb)
            held += got
        assert held, rule.name  # the grid holds pairs in the list, not only pairs out of it


# A compared figure that is not a key figure: read out of the metrics document, no column.
SPEEDUP = FigureRule("kernel_step_speedup", "parity", *PARITY_LINE)
# Beside it in the document: NaN and Infinity (Python's JSON), which neither engine's JSON
# functions read, and a key that ends in the figure's name.
NEIGHBOURS = ({}, {"loss": math.nan}, {"a_kernel_step_speedup": 5.0, "z": -math.inf})


def _metrics_text(value, neighbours: dict) -> str:
    from torchport.kb.sql_common import to_json

    return to_json({**neighbours, **({} if value is None else {SPEEDUP.figure: value})}, "m")


def test_a_figure_read_from_the_metrics_decides_as_its_python_does():
    """A FigureRule whose figure has no column reads it out of the stored metrics
    (``torchport_metric``, a function of the SQLite connection): its SQL
    decides what ``past`` decides on the metrics the result recorded, beside NaN and
    Infinity, whose documents SQLite's json_extract refuses."""
    from torchport.kb.sqlite_schema import register_functions

    assert not SPEEDUP.column and "torchport_metric(a.metrics" in queries.figure_past(SPEEDUP)
    conn = sqlite3.connect(":memory:")
    register_functions(conn)
    cond = queries.figure_past(SPEEDUP)
    sql = (
        f"SELECT CASE WHEN {cond} THEN 1 ELSE 0 END"
        " FROM (SELECT :x AS metrics) AS a, (SELECT :y AS metrics) AS b"
    )
    decided = 0
    values = (*VALUES, math.inf, -math.inf, True)
    for x, y, around in itertools.product(values, values, NEIGHBOURS):
        tx, ty = _metrics_text(x, around), _metrics_text(y, around)
        before, after = (json.loads(t).get(SPEEDUP.figure) for t in (tx, ty))
        python = SPEEDUP.past(before, after, 2.0)
        got = conn.execute(sql, {"x": tx, "y": ty, "parity": 2.0}).fetchone()[0]
        assert bool(got) == python, (tx, ty)
        decided += python
    assert decided


_METRIC_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from((10**23, 10**24 - 1, 10**24, -(10**24), 10**400)),
    st.booleans(),
    st.text(alphabet='a", \\:{}1', max_size=12),
)
_METRIC_KEYS = st.one_of(
    st.just(SPEEDUP.figure),
    st.text(alphabet='ak_", \\:{}', max_size=8),
    st.sampled_from(('x"kernel_step_speedup', 'a, "kernel_step_speedup', "kernel_step_speedu")),
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_METRIC_KEYS, _METRIC_VALUES, max_size=5))
def test_postgresql_reads_a_metric_as_sqlite_does(pg_server, metrics):
    """PostgreSQL reads a figure out of the stored text (records/dialect.py
    ``Dialect.metric``: its json type refuses Python's NaN) exactly as SQLite's
    ``torchport_metric`` does, on hostile documents: keys and strings holding the figure's
    name, quotes and separators; NaN, Infinity, booleans, large integers."""
    from torchport.kb.sql_common import to_json
    from torchport.records.dialect import POSTGRES

    text = to_json(metrics, "metrics")
    with pg.admin(pg_server) as conn:
        got = conn.execute(
            f"SELECT {POSTGRES.metric('a', SPEEDUP.figure)} FROM (SELECT %s::text AS metrics) AS a",
            (text,),
        ).fetchone()[0]
    want = metric_value(text, SPEEDUP.figure)
    assert got == want or (got is not None and want is not None and math.isclose(got, want))


_GRADES = st.sampled_from((None, "on_device", "fallback", "host"))
_OPS = st.dictionaries(
    st.sampled_from(("aten.cumsum.default", "aten.sort.default", "aten.nonzero.default")),
    st.integers(min_value=1, max_value=3),
    max_size=2,
)
_FINDINGS = st.builds(
    lambda ops, classes: {
        "fallback_ops": ops,
        "host_ops": [{"op": op, "evidence_class": c} for op, c in zip(ops, classes, strict=False)],
    },
    _OPS,
    st.lists(st.sampled_from("abc"), max_size=2),
)


@settings(max_examples=120, deadline=None)
@given(_GRADES, _FINDINGS, _GRADES, _FINDINGS)
def test_the_placement_candidate_decides_in_sql_as_in_python(grade_a, found_a, grade_b, found_b):
    """The placement candidate (records/figures.py PLACEMENT_RULE) is declared once: its SQL
    over the stored host_ops column decides what its Python predicate decides, whether the
    view holds a result (its findings) or an outcome row (the column, parsed)."""
    from tests.compare_oracle import decide, host_ops_key
    from torchport.kb.sql_common import host_ops_text
    from torchport.views.compare import PLACEMENT

    cond = queries.compare_decisions()[PLACEMENT]
    assert PLACEMENT == PLACEMENT_RULE.name
    text_a, text_b = host_ops_text(found_a), host_ops_text(found_b)
    sql = (
        f"SELECT CASE WHEN {cond} THEN 1 ELSE 0 END FROM"
        " (SELECT :ga AS grade, :ha AS host_ops) AS a, (SELECT :gb AS grade, :hb AS host_ops) AS b"
    )
    conn = sqlite3.connect(":memory:")
    params = {"ga": grade_a, "ha": text_a, "gb": grade_b, "hb": text_b}
    in_sql = bool(conn.execute(sql, params).fetchone()[0])
    assert in_sql == PLACEMENT_RULE.holds(grade_a, text_a, grade_b, text_b)

    def side(shape, grade, found, text):
        if shape == "result":
            return {"status": "pass", "grade": grade, "findings": found, "metrics": {}}
        cell = json.loads(text) if text else None
        return {"status": "pass", "grade": grade, "host_ops": cell, "figures": {}}

    for shape in ("result", "outcome"):
        a, b = side(shape, grade_a, found_a, text_a), side(shape, grade_b, found_b, text_b)
        assert host_ops_key(a) == text_a and host_ops_key(b) == text_b
        assert (PLACEMENT in decide(a, b)) == in_sql, shape
