"""The key figures a comparison, a baseline and a gate read of every result: copied out of
``metrics`` into columns of their own at insert (schema v3), so comparing two runs of 100 000
results reads numbers, not 200 000 JSON documents. ``metrics`` stays the full record."""

from __future__ import annotations

import math

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

# The figures compared against a line (views/compare.py), and the step-time verdicts
# (views/noise.py): named here, below both the views and the SQL that decides them.
PARITY_FIGURES = ("parity_rmse_ratio", "parity_max_rel_err")
COMPILE_FIGURES = ("compile_cold_first_step_s", "compile_warm_first_step_s")
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
