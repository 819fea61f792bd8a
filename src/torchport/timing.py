"""The one place that reads clocks. Everything that measures time goes through here.

Rule: the device is synchronised through its own API before the clock is read, so the time
covers the work and not just its launch.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

clock = time.perf_counter


def timed(fn: Callable[[], object], sync: Callable[[], None] = lambda: None) -> tuple[object, float]:
    """Run ``fn`` once between two device synchronisations; return (value, seconds)."""
    sync()
    start = clock()
    value = fn()
    sync()
    return value, clock() - start


@dataclass(frozen=True)
class Summary:
    """Order statistics of a sample of durations in seconds."""

    n: int
    median_s: float
    p10_s: float
    p90_s: float
    mean_s: float
    min_s: float
    cv: float  # coefficient of variation (stdev / mean), unitless

    @classmethod
    def of(cls, samples_s: list[float]) -> "Summary":
        if not samples_s:
            raise ValueError("no samples")
        ordered = sorted(samples_s)
        mean = statistics.fmean(ordered)
        stdev = statistics.stdev(ordered) if len(ordered) > 1 else 0.0
        return cls(n=len(ordered), median_s=statistics.median(ordered),
                   p10_s=_quantile(ordered, 0.10), p90_s=_quantile(ordered, 0.90),
                   mean_s=mean, min_s=ordered[0], cv=stdev / mean if mean > 0 else 0.0)


def _quantile(ordered: list[float], q: float) -> float:
    """Linear-interpolated quantile of an already sorted list (numpy's default method)."""
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
