"""The key figures a comparison, a baseline and a gate read of every result: copied out of
``metrics`` into columns of their own at insert (schema v3), so comparing two runs of 100 000
results reads numbers, not 200 000 JSON documents. ``metrics`` stays the full record.

Every rule a comparison decides by is declared here once, and both its SQL
(kb/queries.py) and its Python predicate (views/compare.py) are made from it: the figures
past a line (``FIGURE_RULES``), the status lists (``STATUS_RULES``) and the placement
candidate (``PLACEMENT_RULE``). A compared figure that is not a key figure is read out of the
recorded ``metrics`` (``metric_value``; no column, no migration)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Protocol


class Dialect(Protocol):
    """What a rule's SQL needs of an engine's dialect (records/dialect.py, which builds on
    this module: a rule names no engine)."""

    def differs(self, a: str, b: str) -> str: ...


KEY_FIGURES = (
    "perf_median_ms",
    "perf_p10_ms",
    "perf_p90_ms",
    "perf_samples",
    "parity_rmse_ratio",
    "parity_max_rel_err",
    "compile_cold_first_step_s",
    "compile_warm_first_step_s",
    "perf_peak_bytes",
)


@dataclass(frozen=True)
class FigureRule:
    """One comparison rule, declared once: the SQL that decides it inside the store
    (kb/queries.py ``figure_past``) and the Python predicate (``past``) that
    views/compare.py applies are both made from it.

    figure:    the figure of two paired results: a key figure (a column of its own,
               KEY_FIGURES), else a metric read out of the recorded ``metrics`` (a name of
               lower-case letters, digits and underscores);
    shows_in:  the comparison list a pair past the line is shown in;
    line:      the line's name: the SQL parameter ``:line`` and, with ``option``, the
               keyword the store's compare methods and views/compare.py LINES take;
    default:   the line's value;
    both_ways: past when B/A or A/B is above the line (else only B/A, from a positive A).
    """

    figure: str
    shows_in: str
    line: str
    option: str
    default: float
    both_ways: bool

    def __post_init__(self) -> None:
        if not METRIC_NAME.fullmatch(self.figure):  # it is written into the SQL
            raise ValueError(f"a figure is named in [a-z0-9_], not {self.figure!r}")

    @property
    def column(self) -> bool:
        """Whether the figure has a column of its own (else it is read from ``metrics``)."""
        return self.figure in KEY_FIGURES

    def past(self, before, after, line: float) -> bool:
        """Whether the pair (A's figure, B's figure) is past ``line``."""
        if not (_number(before) and _number(after)):
            return False
        if self.both_ways:
            return before != 0 and after != 0 and (after / before > line or before / after > line)
        return before > 0 and after / before > line


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


METRIC_NAME = re.compile(r"[a-z0-9_]+")
# The longest number read out of a metrics document, in characters after its sign: Python
# writes any finite float in at most 23 (-1.7976931348623157e+308); a longer integer is
# no figure.
METRIC_DIGITS = 24


def metric_value(metrics_text: str | None, name: str) -> float | None:
    """One figure out of a stored ``metrics`` document (Python's JSON, NaN and Infinity
    included), as SQL reads it: a number, else None (missing, NaN, not a number, not a
    document). SQLite calls it as ``torchport_metric`` (kb/sqlite_schema.py); PostgreSQL
    reads the same from the text (records/dialect.py ``Dialect.metric``)."""
    try:
        value = json.loads(metrics_text).get(name) if metrics_text else None
    except (ValueError, AttributeError, TypeError):
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        return None
    if isinstance(value, int) and len(str(abs(value))) > METRIC_DIGITS:
        return None  # past a double's range, or near it: no figure (as PostgreSQL reads it)
    return float(value)


# The figures compared against a line (views/compare.py) in the order a comparison decides
# them (the store's decision bits follow it). A new compared figure is one line here: a key
# figure is read from its column, any other recorded metric from the metrics document.
# A line: (name, option, default, both_ways), shared by the figures it judges.
Line = tuple[str, str, float, bool]
PARITY_LINE: Line = ("parity", "parity_factor", 10.0, False)  # the error grew tenfold
COMPILE_LINE: Line = ("compile", "compile_ratio", 1.15, True)  # PyTorch HUD's 1.15x
MEMORY_LINE: Line = ("memory", "memory_ratio", 1.10, True)  # peak memory, 10% either way
FIGURE_RULES = (
    FigureRule("parity_rmse_ratio", "parity", *PARITY_LINE),
    FigureRule("parity_max_rel_err", "parity", *PARITY_LINE),
    FigureRule("compile_cold_first_step_s", "compile", *COMPILE_LINE),
    FigureRule("compile_warm_first_step_s", "compile", *COMPILE_LINE),
    FigureRule("perf_peak_bytes", "memory", *MEMORY_LINE),
)
PARITY_FIGURES = tuple(r.figure for r in FIGURE_RULES if r.shows_in == "parity")


@dataclass(frozen=True)
class StatusRule:
    """A status list of a comparison, declared once: the SQL condition over the pair (a, b)
    (kb/queries.py ``compare_decisions``) and the Python predicate (``holds``) are both
    made from it. A pair is in the list when A passed or not (``a_passed``), B passed or not
    (``b_passed``) and, with ``moved``, the two failures differ in status or stage."""

    name: str
    a_passed: bool
    b_passed: bool
    moved: bool = False

    def holds(self, a_status: str, a_stage, b_status: str, b_stage) -> bool:
        return (
            (a_status == "pass") == self.a_passed
            and (b_status == "pass") == self.b_passed
            and (not self.moved or (a_status, a_stage) != (b_status, b_stage))
        )

    def sql(self, d: Dialect) -> str:
        """The condition over the pair (a, b), in ``d``'s SQL."""

        def passed(side: str, yes: bool) -> str:
            return f"{side}.status {'=' if yes else '!='} 'pass'"

        moved = (
            f" AND (a.status != b.status OR {d.differs('a.stage', 'b.stage')})"
            if self.moved
            else ""
        )
        return f"{passed('a', self.a_passed)} AND {passed('b', self.b_passed)}{moved}"


STATUS_RULES = (
    StatusRule("newly_passing", a_passed=False, b_passed=True),
    StatusRule("newly_failing", a_passed=True, b_passed=False),
    StatusRule("failure_changed", a_passed=False, b_passed=False, moved=True),
)
COMPILE_FIGURES = tuple(r.figure for r in FIGURE_RULES if r.shows_in == "compile")
# What an outcome row (kb/queries.py ``select_outcomes``) carries: the key figures, then
# each compared figure read from the metrics document.
OUTCOME_FIGURES = KEY_FIGURES + tuple(r.figure for r in FIGURE_RULES if not r.column)


@dataclass(frozen=True)
class PlacementRule:
    """The placement candidate, declared once: a pair whose placement may have changed, both
    graded and with different grades or host-op sets. The SQL condition (``sql``, over the
    stored ``host_ops`` column) and the Python predicate (``holds``, over the same text,
    ``host_ops_key``) are both made from it; views/compare.py lists the ops added and removed
    of each pair it holds for."""

    name: str = "placement_candidate"

    def holds(self, a_grade, a_host_ops: str | None, b_grade, b_host_ops: str | None) -> bool:
        return (
            a_grade is not None
            and b_grade is not None
            and (a_grade != b_grade or a_host_ops != b_host_ops)
        )

    def sql(self, d: Dialect, a_host_ops: str, b_host_ops: str) -> str:
        """The condition over the pair (a, b) in ``d``'s SQL, given each side's host-op SQL
        expression."""
        return (
            "a.grade IS NOT NULL AND b.grade IS NOT NULL AND (a.grade != b.grade"
            f" OR {d.differs(a_host_ops, b_host_ops)})"
        )


PLACEMENT_RULE = PlacementRule()
# The step-time verdicts (views/noise.py): named here, below both the views and the SQL.
SLOWER, FASTER, WITHIN, NOT_JUDGED = "slower", "faster", "within noise", "not judged"


@dataclass(frozen=True)
class StepTimeRule:
    """Is a change in step time real? The rule, declared once (docs/verdicts.md): the
    Python decision (``decide``: views/noise.py for a gate, a baseline and a scorecard), the
    SQL a comparison decides every pair with inside the store (``sql``, kb/queries.py
    ``step_time_verdict``) and the words its tables and remarks print (``words``) are all
    made from its branches and its two thresholds.

    Two runs never interleave their samples, so a difference in medians is called real only
    when it stands out of the noise both recorded: each median lies outside the other run's
    p10-p90 range, and the medians are at least ``min_change`` apart. A side with fewer than
    ``min_samples`` samples, or no spread recorded, is not judged. A side without a positive
    step time is not timed: no verdict at all (``timed``)."""

    min_samples: int = 5
    min_change: float = 0.02

    # The branches in the order they decide: (why, verdict). ``outside`` says slower or faster.
    BRANCHES = (
        ("few_samples", NOT_JUDGED),
        ("no_spread", NOT_JUDGED),
        ("inside", WITHIN),
        ("under_floor", WITHIN),
        ("outside", None),
    )

    @property
    def lines(self) -> dict[str, float]:
        """The thresholds by keyword: the SQL's named parameters (``:min_samples``, ...)."""
        return {"min_samples": self.min_samples, "min_change": self.min_change}

    @staticmethod
    def timed(before, after) -> bool:
        """Both medians positive numbers: a step time on both sides."""
        return bool(before) and bool(after)

    def decide(
        self, before: dict, after: dict, tolerance: float | None = None
    ) -> tuple[str, str] | None:
        """(verdict, why: a branch's name, or ``tolerance``) of figures ``before`` and
        ``after`` (``perf_median_ms``, ``perf_p10_ms``, ``perf_p90_ms``, ``perf_samples``),
        None when a side is not timed. ``tolerance``: a baseline file's fraction, held to
        instead of the measured noise (Python only: a comparison never has one)."""
        # The branches in BRANCHES' order, each tested only when reached: a gate decides
        # every timed result of a run of 100 000 with it.
        a, b = before.get(MEDIAN), after.get(MEDIAN)
        if not a or not b:  # not ``timed``
            return None
        if tolerance is not None:
            ratio = b / a
            slower, faster = ratio > 1 + tolerance, ratio < 1 / (1 + tolerance)
            return (SLOWER if slower else FASTER if faster else WITHIN), "tolerance"
        n_a, n_b = before.get(SAMPLES), after.get(SAMPLES)
        least = self.min_samples
        if (n_a is not None and n_a < least) or (n_b is not None and n_b < least):
            return NOT_JUDGED, "few_samples"
        low_a, high_a = before.get(P10), before.get(P90)
        low_b, high_b = after.get(P10), after.get(P90)
        if low_a is None or high_a is None or low_b is None or high_b is None:
            return NOT_JUDGED, "no_spread"
        up = b > high_a and a < low_b
        if not (up or (b < low_a and a > high_b)):
            return WITHIN, "inside"
        if abs(b / a - 1) < self.min_change:
            return WITHIN, "under_floor"
        return (SLOWER if up else FASTER), "outside"

    def timed_sql(self, figure) -> str:
        """``timed`` over the pair (a, b); ``figure(alias, name)``: a figure's SQL."""
        a, b = figure("a", MEDIAN), figure("b", MEDIAN)
        return f"{a} IS NOT NULL AND {b} IS NOT NULL AND {a} != 0 AND {b} != 0"

    def sql(self, figure, says: dict[str, str], judged: str = "TRUE") -> str:
        """``decide`` (without a tolerance) over the pair (a, b) as one SQL expression: what
        ``says`` gives for each verdict (SQL values), NULL when the pair is not timed or
        ``judged`` (an SQL condition: which pairs the caller judges) does not hold.
        ``figure(alias, name)``: a figure's SQL; named parameters: ``lines``' keys."""
        med_a, med_b = figure("a", MEDIAN), figure("b", MEDIAN)
        low_a, high_a, low_b, high_b = [figure(x, q) for x in "ab" for q in SPREAD]
        up = f"({med_b} > {high_a} AND {med_a} < {low_b})"
        down = f"({med_b} < {low_a} AND {med_a} > {high_b})"
        ratio = f"(CAST({med_b} AS DOUBLE PRECISION) / {med_a})"
        holds = {
            "few_samples": f"{figure('a', SAMPLES)} < :min_samples"
            f" OR {figure('b', SAMPLES)} < :min_samples",
            "no_spread": " OR ".join(f"{x} IS NULL" for x in (low_a, high_a, low_b, high_b)),
            "inside": f"NOT ({up} OR {down})",
            "under_floor": f"abs({ratio} - 1) < :min_change",
        }
        cases = " ".join(
            f"WHEN {holds[why]} THEN {says[verdict]}"
            for why, verdict in self.BRANCHES
            if verdict is not None
        )
        return (
            f"CASE WHEN NOT ({judged} AND {self.timed_sql(figure)}) THEN NULL {cases}"
            f" WHEN {up} THEN {says[SLOWER]} ELSE {says[FASTER]} END"
        )

    @property
    def words(self) -> str:
        """The rule as a table's note and a comparison's remark say it."""
        return (
            f"each median outside the other run's p10-p90 and at least {self.min_change:.0%} apart"
        )

    def few_words(self, n_a, n_b) -> str:
        return f"too few samples (n = {n_a}, {n_b}; needs {self.min_samples}+)"

    def floor_words(self, ranges: str) -> str:
        return f"outside both spreads ({ranges}) but under the {self.min_change:.0%} floor"


MEDIAN, SAMPLES = "perf_median_ms", "perf_samples"
P10, P90 = SPREAD = ("perf_p10_ms", "perf_p90_ms")
STEP_TIME = StepTimeRule()
MIN_SAMPLES, MIN_CHANGE = STEP_TIME.min_samples, STEP_TIME.min_change
# Every line a comparison is decided by, by its keyword: each FigureRule's, the step time's.
COMPARE_LINES: dict[str, float] = {
    **{rule.option: rule.default for rule in FIGURE_RULES},
    **STEP_TIME.lines,
}
# Each figure list's line in words, from its value (the tables' titles): ``{times}`` the line
# as a factor (10x), ``{over}`` as the share past 1 (10%).
LINE_WORDS = {
    "parity": "error up more than {times}",
    "compile": "beyond {times} (PyTorch HUD's line)",
    "memory": "beyond {over}",
}


def line_words(shows_in: str, lines: dict[str, float] | None = None) -> str:
    """A figure list's line in words (``LINE_WORDS``), from its FigureRule's value
    (``lines``: by option, COMPARE_LINES by default): ``parity`` -> ``error up more than
    10x``."""
    option = next(rule.option for rule in FIGURE_RULES if rule.shows_in == shows_in)
    value = (lines or COMPARE_LINES)[option]
    return LINE_WORDS[shows_in].format(times=f"{value:g}x", over=f"{value - 1:.0%}")


def key_figures(metrics: dict) -> list[float | None]:
    """The column values, in KEY_FIGURES order (None where a figure is missing or NaN)."""
    out: list[float | None] = []
    for name in KEY_FIGURES:
        value = metrics.get(name)
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and not (isinstance(value, float) and math.isnan(value))
        )
        out.append(value if ok else None)
    return out
