"""The step-time rule is declared once (records/figures.py ``StepTimeRule``): its Python
decision (views/noise.py), the SQL the store's comparison decides with (kb/queries.py
``step_time_verdict``) and the words the tables and remarks print are all made from it. With
the default thresholds and with others set in that one place, the three agree on generated
timings."""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchport.kb import queries
from torchport.records import figures
from torchport.records.figures import FASTER, NOT_JUDGED, SLOWER, STEP_TIME, WITHIN

FIGURES = ("perf_median_ms", "perf_p10_ms", "perf_p90_ms", "perf_samples")
OTHER = replace(STEP_TIME, min_samples=3, min_change=0.10)


def _set_rule(monkeypatch, rule) -> None:
    """``rule`` in place of STEP_TIME, as if declared so in records/figures.py: every module
    name bound to it rebound, and the comparison's lines (COMPARE_LINES) from it."""
    for module in [m for n, m in sys.modules.items() if n.startswith("torchport.")]:
        for attr, value in list(vars(module).items()):
            if value is STEP_TIME:
                monkeypatch.setattr(module, attr, rule)
    for key, value in rule.lines.items():
        monkeypatch.setitem(figures.COMPARE_LINES, key, value)


@st.composite
def timings(draw) -> dict:
    """A side's step-time figures: a median (none, zero, or near 10 ms), a spread around it
    (or none), a sample count (or none)."""
    median = draw(st.one_of(st.none(), st.just(0.0), st.floats(9.0, 11.0)))
    out: dict = {"perf_median_ms": median}
    if median is not None and draw(st.booleans()):
        low, high = draw(st.floats(0.0, 0.2)), draw(st.floats(0.0, 0.2))
        out |= {"perf_p10_ms": median * (1 - low), "perf_p90_ms": median * (1 + high)}
    out["perf_samples"] = draw(st.one_of(st.none(), st.integers(1, 8)))
    return out


def _sql_verdict(conn, before: dict, after: dict) -> str | None:
    says = {v: f"'{v}'" for v in (SLOWER, FASTER, WITHIN, NOT_JUDGED)}
    sql = queries.step_time_verdict(says=says)
    conn.execute("DELETE FROM results")
    for side, f in (("a", before), ("b", after)):
        row = (side, "pass", *map(f.get, FIGURES))
        conn.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)", row)
    lines = {k: figures.COMPARE_LINES[k] for k in ("min_samples", "min_change")}
    row = conn.execute(
        f"SELECT {sql} FROM results a, results b WHERE a.side = 'a' AND b.side = 'b'", lines
    ).fetchone()
    return row[0]


@pytest.mark.parametrize("rule", [STEP_TIME, OTHER], ids=["declared", "changed"])
def test_python_sql_and_words_agree_with_the_one_declaration(monkeypatch, rule):
    from torchport.views import compare, noise

    _set_rule(monkeypatch, rule)
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE results (side TEXT, status TEXT, {', '.join(FIGURES)})")

    @settings(max_examples=300, deadline=None)
    @given(timings(), timings())
    def agree(before: dict, after: dict) -> None:
        python = noise.step_verdict(before, after)
        assert _sql_verdict(conn, before, after) == python, (before, after)
        judged = noise.judge(before, after)
        assert (judged and judged.verdict) == python

    agree()
    # The words: the comparison's remark, and the deciding test of a pair under the floor
    out = compare.Comparison(run_a={}, run_b={}, perf_verdicts={SLOWER: 1})
    remark = compare._remarks(
        out, {"id": "a", "state": "complete"}, {"id": "b", "state": "complete"}
    )
    assert f"at least {rule.min_change:.0%} apart" in remark[-1]
    tight = {"perf_p10_ms": 9.99, "perf_p90_ms": 10.001, "perf_samples": rule.min_samples}
    floor = noise.judge(
        {"perf_median_ms": 10.0, **tight},
        {
            "perf_median_ms": 10.0 * (1 + rule.min_change / 2),
            "perf_p10_ms": 10.002,
            "perf_p90_ms": 10.3,
            "perf_samples": rule.min_samples,
        },
    )
    assert floor is not None and floor.verdict == WITHIN
    assert f"under the {rule.min_change:.0%} floor" in floor.test
    few = noise.judge(
        {"perf_median_ms": 10.0, "perf_samples": rule.min_samples - 1}, {"perf_median_ms": 12.0}
    )
    assert few is not None and f"needs {rule.min_samples}+" in few.test


def test_a_changed_threshold_changes_the_verdict_in_sql_and_python(monkeypatch):
    """The same pair, 5 % apart and outside both spreads: slower under the declared 2 %
    floor, within noise under a 10 % one, in Python and in SQL alike."""
    from torchport.views import noise

    before = {"perf_median_ms": 10.0, "perf_p10_ms": 9.9, "perf_p90_ms": 10.1, "perf_samples": 9}
    after = {"perf_median_ms": 10.5, "perf_p10_ms": 10.4, "perf_p90_ms": 10.6, "perf_samples": 9}
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE results (side TEXT, status TEXT, {', '.join(FIGURES)})")
    assert noise.step_verdict(before, after) == _sql_verdict(conn, before, after) == SLOWER
    _set_rule(monkeypatch, OTHER)
    assert noise.step_verdict(before, after) == _sql_verdict(conn, before, after) == WITHIN


def test_each_figure_lists_title_is_made_from_its_line(monkeypatch):
    """The tables' titles say each FigureRule's line as declared (records/figures.py
    LINE_WORDS), and follow it when it changes."""
    from torchport.views.compare import Comparison
    from torchport.views.compare_tables import compile_view, memory_view, parity_view

    cmp = Comparison(run_a={}, run_b={})
    titles = [view(cmp, None).title for view in (parity_view, compile_view, memory_view)]
    assert titles == [
        "Parity drift (error up more than 10x) (0)",
        "Compile time beyond 1.15x (PyTorch HUD's line) (0)",
        "Peak memory beyond 10% (0)",
    ]
    monkeypatch.setitem(figures.COMPARE_LINES, "memory_ratio", 1.25)
    monkeypatch.setitem(figures.COMPARE_LINES, "parity_factor", 100.0)
    assert memory_view(cmp, None).title == "Peak memory beyond 25% (0)"
    assert parity_view(cmp, None).title == "Parity drift (error up more than 100x) (0)"
