"""The key figures a comparison, a baseline and a gate read of every result: copied out of
``metrics`` into columns of their own at insert (schema v3), so comparing two runs of 100 000
results reads numbers, not 200 000 JSON documents. ``metrics`` stays the full record."""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    (records/queries.py ``figure_past``) and the Python predicate (``past``) that
    views/compare.py applies are both made from it.

    figure:    the key figure (a column of its own, KEY_FIGURES) of two paired results;
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

    def past(self, before, after, line: float) -> bool:
        """Whether the pair (A's figure, B's figure) is past ``line``."""
        if not (_number(before) and _number(after)):
            return False
        if self.both_ways:
            return before != 0 and after != 0 and (after / before > line or before / after > line)
        return before > 0 and after / before > line


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# The figures compared against a line (views/compare.py) in the order a comparison decides
# them (the store's decision bits follow it). A new compared figure is one line here (and,
# when it is not yet a key figure, its column in KEY_FIGURES).
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
    (records/queries.py ``compare_decisions``) and the Python predicate (``holds``) are both
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

    def sql(self) -> str:
        def passed(side: str, yes: bool) -> str:
            return f"{side}.status {'=' if yes else '!='} 'pass'"

        moved = " AND (a.status != b.status OR a.stage IS NOT b.stage)" if self.moved else ""
        return f"{passed('a', self.a_passed)} AND {passed('b', self.b_passed)}{moved}"


STATUS_RULES = (
    StatusRule("newly_passing", a_passed=False, b_passed=True),
    StatusRule("newly_failing", a_passed=True, b_passed=False),
    StatusRule("failure_changed", a_passed=False, b_passed=False, moved=True),
)
COMPILE_FIGURES = tuple(r.figure for r in FIGURE_RULES if r.shows_in == "compile")
# The step-time verdicts (views/noise.py): named here, below both the views and the SQL.
SLOWER, FASTER, WITHIN, NOT_JUDGED = "slower", "faster", "within noise", "not judged"


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
