"""Each comparison rule is declared once (records/figures.py FIGURE_RULES): the SQL condition
made from it (queries.figure_past) decides exactly what its Python predicate decides."""

from __future__ import annotations

import itertools
import json
import math
import sqlite3

import pytest

from torchport.records import queries
from torchport.records.figures import FIGURE_RULES, KEY_FIGURES
from torchport.views.compare import LINES

VALUES = (None, 0, 0.0, -2.0, -1.0, 1e-9, 0.5, 1.0, 1.1, 1.15, 1.3, 2, 10.0, 20.0, math.nan)
COLUMNS, JSON = queries.FIGURE_COLUMNS_FROM, queries.FIGURE_COLUMNS_FROM - 1  # schema versions


def _sql_decides(conn, rule, version: int, x, y, line: float) -> bool:
    cond = queries.figure_past(rule, version=version)
    if version >= queries.FIGURE_COLUMNS_FROM:  # the figure's own column
        sides = f"(SELECT :x AS {rule.figure}) AS a, (SELECT :y AS {rule.figure}) AS b"
        params = {"x": x, "y": y}
    else:  # an older schema: the figure read out of the metrics JSON (NaN is not JSON)
        sides = "(SELECT :x AS metrics) AS a, (SELECT :y AS metrics) AS b"
        params = {
            side: json.dumps({} if v is None or v != v else {rule.figure: v})
            for side, v in (("x", x), ("y", y))
        }
    sql = f"SELECT CASE WHEN {cond} THEN 1 ELSE 0 END FROM {sides}"
    return bool(conn.execute(sql, {**params, rule.line: line}).fetchone()[0])


@pytest.mark.parametrize("rule", FIGURE_RULES, ids=lambda r: r.figure)
@pytest.mark.parametrize("version", [COLUMNS, JSON], ids=["columns", "json"])
def test_the_sql_and_the_python_of_a_rule_agree(rule, version):
    conn = sqlite3.connect(":memory:")
    decided = 0
    for x, y, line in itertools.product(VALUES, VALUES, (rule.default, 1.0, 2.0)):
        python = rule.past(x, y, line)
        assert _sql_decides(conn, rule, version, x, y, line) == python, (x, y, line)
        decided += python
    assert decided  # the grid holds pairs past the line, not only pairs short of it


def test_every_rule_is_a_key_figure_with_a_line_the_views_use():
    assert {r.figure for r in FIGURE_RULES} <= set(KEY_FIGURES)
    assert all(LINES[r.option] == r.default for r in FIGURE_RULES)
    decisions = queries.compare_decisions(version=COLUMNS)
    assert [r.figure for r in FIGURE_RULES] == [n for n in decisions if n in KEY_FIGURES]


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
                f"SELECT CASE WHEN {rule.sql()} THEN 1 ELSE 0 END FROM"
                " (SELECT :sa AS status, :ta AS stage) AS a,"
                " (SELECT :sb AS status, :tb AS stage) AS b"
            )
            got = conn.execute(sql, {"sa": sa, "ta": ta, "sb": sb, "tb": tb}).fetchone()[0]
            assert bool(got) == rule.holds(sa, ta, sb, tb), (rule.name, sa, ta, sb, tb)
            held += got
        assert held, rule.name  # the grid holds pairs in the list, not only pairs out of it
