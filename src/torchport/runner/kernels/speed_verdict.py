"""When a timed A/B decides a speed verdict (``correct_faster`` / ``correct_slower``).

A gap must be beyond the noise of its own timing and of a minimum size: a 1 % gap between two
step medians on a loaded host is no speed-up. Used by the kernel ladder's verdict.
"""

from __future__ import annotations

# A speed verdict needs the step medians at least this far apart.
MIN_SPEED_GAP = 0.05


def gap_unclear(timing: dict | None, speed: float) -> str:
    """Why the step medians' gap decides no speed verdict ("" when it does): under
    ``MIN_SPEED_GAP``, or inside the noise: the per-round ratios' p10-p90 (each round times
    both sides back to back) spans 1 and the sides' p10-p90 ranges overlap. ``timing`` holds
    ``step`` ({"original": {...}, "replacement": {...}} with ``p10_ms`` / ``p90_ms``) and
    ``step_paired`` (the ratios' ``p10`` / ``p90``)."""
    gap = abs(speed - 1.0)
    if gap < MIN_SPEED_GAP:
        return (
            f"the step medians differ by {gap:.1%}, under the {MIN_SPEED_GAP:.0%} a speed "
            "verdict needs"
        )
    step = timing.get("step") if isinstance(timing, dict) else None
    if not isinstance(step, dict) or len(step) != 2:
        return ""
    paired = (timing or {}).get("step_paired") or {}
    if paired and (paired["p10"] > 1.0 or paired["p90"] < 1.0):
        return ""
    o, r = step["original"], step["replacement"]
    if r["p10_ms"] > o["p90_ms"] or r["p90_ms"] < o["p10_ms"]:
        return ""
    spans = (
        f"the per-round ratio's p10-p90 {paired['p10']:.2f}-{paired['p90']:.2f} spans 1 and "
        if paired
        else ""
    )
    return f"the gap is inside the noise: {spans}the sides' p10-p90 ranges overlap"
