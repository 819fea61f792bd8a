"""Is a change in step time real? Judged against the spread each run measured, by the rule
declared once in records/figures.py (``StepTimeRule``, ``STEP_TIME``): its Python decision
here, its SQL in the store's comparison, its words in both. A baseline file may fix a
tolerance instead; then the ratio is held to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torchport.records.figures import (
    FASTER,
    MIN_CHANGE,
    MIN_SAMPLES,
    NOT_JUDGED,
    SLOWER,
    STEP_TIME,
    WITHIN,
)

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


def step_verdict(before: dict, after: dict, *, tolerance: float | None = None) -> str | None:
    """``judge``'s verdict alone (None: no step time on a side), without its wording."""
    decided = STEP_TIME.decide(before, after, tolerance)
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
    decided = STEP_TIME.decide(before, after, tolerance)
    if decided is None:
        return None
    verdict, why = decided
    a, b = before["perf_median_ms"], after["perf_median_ms"]

    def ranges() -> str:
        return _ranges(_spread(before), _spread(after), names)  # type: ignore[arg-type]

    def test() -> str:  # written only when read
        if why == "tolerance":
            return f"against the baseline file's tolerance ±{tolerance:.0%}"
        if why == "few_samples":
            return STEP_TIME.few_words(before.get("perf_samples"), after.get("perf_samples"))
        if why == "no_spread":
            return "no p10-p90 spread recorded"
        if why == "inside":
            return f"a median lies inside the other run's p10-p90 ({ranges()})"
        if why == "under_floor":
            return STEP_TIME.floor_words(ranges())
        return OUTSIDE.format(ranges=ranges())

    return PerfJudgement(a, b, b / a, verdict, test)


OUTSIDE = "each median lies outside the other run's p10-p90 ({ranges})"


def _ranges(sa: tuple[float, float], sb: tuple[float, float], names: tuple[str, str]) -> str:
    return (
        f"{names[0]} p10-p90 {sa[0]:.3g}-{sa[1]:.3g}, {names[1]} p10-p90 {sb[0]:.3g}-{sb[1]:.3g} ms"
    )


def change(before: dict, after: dict, verdict: str) -> PerfJudgement:
    """A step-time change already judged ``verdict`` (slower or faster, by ``judge`` or by
    the store's SQL twin of it, records/figures.py StepTimeRule.sql), worded as ``judge``
    words it; nothing is decided again here."""
    a, b = before["perf_median_ms"], after["perf_median_ms"]
    sa, sb = _spread(before), _spread(after)
    ranges = _ranges(sa, sb, ("A", "B")) if sa and sb else "no p10-p90 spread recorded"
    return PerfJudgement(a, b, b / a, verdict, lambda: OUTSIDE.format(ranges=ranges))
