"""Is a change in step time real? Judged against the spread each run measured.

Two runs never interleave their samples (they ran at different times, maybe on different
machines), so a difference in medians is called real only when it stands out of the noise both
runs recorded: **each median lies outside the other run's p10-p90 range**, and the medians are
at least ``MIN_CHANGE`` apart (within-run spread understates between-process noise, and a 1%
difference decides nothing). A baseline file may fix a tolerance instead; then the ratio is
held to it. A run with too few samples or no spread recorded is not judged, and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torchport.records.figures import FASTER, MIN_CHANGE, MIN_SAMPLES, NOT_JUDGED, SLOWER, WITHIN

__all__ = [
    "FASTER",
    "MIN_CHANGE",
    "MIN_SAMPLES",
    "NOT_JUDGED",
    "SLOWER",
    "WITHIN",
    "PerfJudgement",
    "change",
    "judge",
    "step_verdict",
]


@dataclass(frozen=True)
class PerfJudgement:
    before_ms: float
    after_ms: float
    ratio: float  # after / before: > 1 is slower
    verdict: str  # slower | faster | within noise | not judged
    # The rule that decided, with its numbers: written only when read (``test``); a comparison
    # of two 100 000-result runs judges every timed pair and shows only the changes.
    explain: Callable[[], str] = field(repr=False, compare=False)

    @property
    def test(self) -> str:
        return self.explain()


def _spread(m: dict) -> tuple[float, float] | None:
    low, high = m.get("perf_p10_ms"), m.get("perf_p90_ms")
    return (low, high) if low is not None and high is not None else None


# Why a verdict was reached: the branch of the rule that decided (``_decide``).
_BY_TOLERANCE, _FEW_SAMPLES, _NO_SPREAD, _INSIDE, _UNDER_FLOOR, _OUTSIDE = range(6)


def _decide(before: dict, after: dict, tolerance: float | None) -> tuple[str, int] | None:
    """The rule, once: (verdict, which branch decided), or None when a side has no step time.
    Lean (no text, no closure): a gate decides every timed result of a run with it."""
    a, b = before.get("perf_median_ms"), after.get("perf_median_ms")
    if not a or not b:
        return None
    ratio = b / a
    if tolerance is not None:
        slower, faster = ratio > 1 + tolerance, ratio < 1 / (1 + tolerance)
        return (SLOWER if slower else FASTER if faster else WITHIN), _BY_TOLERANCE
    n_a, n_b = before.get("perf_samples"), after.get("perf_samples")
    if (n_a is not None and n_a < MIN_SAMPLES) or (n_b is not None and n_b < MIN_SAMPLES):
        return NOT_JUDGED, _FEW_SAMPLES
    sa, sb = _spread(before), _spread(after)
    if sa is None or sb is None:
        return NOT_JUDGED, _NO_SPREAD
    outside_up = b > sa[1] and a < sb[0]
    outside_down = b < sa[0] and a > sb[1]
    if not (outside_up or outside_down):
        return WITHIN, _INSIDE
    if abs(ratio - 1) < MIN_CHANGE:
        return WITHIN, _UNDER_FLOOR
    return (SLOWER if outside_up else FASTER), _OUTSIDE


def step_verdict(before: dict, after: dict, *, tolerance: float | None = None) -> str | None:
    """``judge``'s verdict alone (None: no step time on a side), without its wording."""
    decided = _decide(before, after, tolerance)
    return decided[0] if decided is not None else None


def judge(
    before: dict,
    after: dict,
    *,
    tolerance: float | None = None,
    names: tuple[str, str] = ("A", "B"),
) -> PerfJudgement | None:
    """``before``/``after``: metrics with ``perf_median_ms`` (and p10/p90/samples); None when
    either has no step time. ``tolerance``: a fraction from a baseline file, used instead of
    the measured noise. ``names``: what the deciding test calls the two sides."""
    decided = _decide(before, after, tolerance)
    if decided is None:
        return None
    verdict, why = decided
    a, b = before["perf_median_ms"], after["perf_median_ms"]

    def ranges() -> str:
        return _ranges(_spread(before), _spread(after), names)  # type: ignore[arg-type]

    def test() -> str:  # written only when read
        if why == _BY_TOLERANCE:
            return f"against the baseline file's tolerance ±{tolerance:.0%}"
        if why == _FEW_SAMPLES:
            n_a, n_b = before.get("perf_samples"), after.get("perf_samples")
            return f"too few samples (n = {n_a}, {n_b}; needs {MIN_SAMPLES}+)"
        if why == _NO_SPREAD:
            return "no p10-p90 spread recorded"
        if why == _INSIDE:
            return f"a median lies inside the other run's p10-p90 ({ranges()})"
        if why == _UNDER_FLOOR:
            return f"outside both spreads ({ranges()}) but under the {MIN_CHANGE:.0%} floor"
        return OUTSIDE.format(ranges=ranges())

    return PerfJudgement(a, b, b / a, verdict, test)


OUTSIDE = "each median lies outside the other run's p10-p90 ({ranges})"


def _ranges(sa: tuple[float, float], sb: tuple[float, float], names: tuple[str, str]) -> str:
    return (
        f"{names[0]} p10-p90 {sa[0]:.3g}-{sa[1]:.3g}, {names[1]} p10-p90 {sb[0]:.3g}-{sb[1]:.3g} ms"
    )


def change(before: dict, after: dict, verdict: str) -> PerfJudgement:
    """A step-time change already judged ``verdict`` (slower or faster, by ``judge`` or by
    the store's SQL twin of it, records/queries.py step_time_verdict), worded as ``judge``
    words it; nothing is decided again here."""
    a, b = before["perf_median_ms"], after["perf_median_ms"]
    sa, sb = _spread(before), _spread(after)
    ranges = _ranges(sa, sb, ("A", "B")) if sa and sb else "no p10-p90 spread recorded"
    return PerfJudgement(a, b, b / a, verdict, lambda: OUTSIDE.format(ranges=ranges))
