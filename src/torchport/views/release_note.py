"""A release note: what changed from the baseline environment to each other one, in a line
("torch-2.12.1 -> torch-2.13.0 on cpu, suite smoke: 3 newly failing, 1 fixed, compile wait
-12 %, step time within noise"), with the comparison (views/compare.py) behind every count.

Each count comes from the comparison of the two stored runs on the (case, mode) pairs both
recorded; the compile wait is the median ratio of the cold first compiled step over the pairs
measured on both sides (one measurement a side: the note gives the count, and how many pairs
crossed the comparison's 1.15x line); step time is judged against each run's measured p10-p90
(views/noise.py). The packages that differ between the two environments' locks come first.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass, field

from torchport.views.base import Column, View
from torchport.views.compare import (
    COMPILE_RATIO,
    Comparison,
    compare_runs,
    metrics,
    paired,
)
from torchport.views.noise import FASTER, SLOWER, WITHIN

COMPILE_FIGURE = "compile_cold_first_step_s"


@dataclass
class PairNote:
    baseline: str  # environment names
    other: str
    run_a: str  # run ids
    run_b: str
    headline: str
    counts: dict[str, int]
    compile_wait: dict  # ratio (median), pairs, past_line; ratio None when none measured
    packages: list[dict]  # name, a, b (None: not installed on that side)
    comparison: Comparison

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ReleaseNote:
    matrix: str
    pairs: list[PairNote] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # environments that did not run

    def to_dict(self) -> dict:
        return {
            "format": "torchport-release-note/1",
            "matrix": self.matrix,
            "pairs": [p.to_dict() for p in self.pairs],
            "problems": self.problems,
        }


def parse_lock(text: str) -> dict[str, str]:
    """'name==version' lines (``uv pip freeze``) -> {name: version}; others are skipped."""
    out = {}
    for line in text.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def package_changes(lock_a: str | None, lock_b: str | None) -> list[dict]:
    if lock_a is None or lock_b is None:
        return []
    a, b = parse_lock(lock_a), parse_lock(lock_b)
    return [
        {"name": n, "a": a.get(n), "b": b.get(n)}
        for n in sorted(set(a) | set(b))
        if a.get(n) != b.get(n)
    ]


def compile_wait(store, run_a: str, run_b: str) -> dict:
    """The median ratio (B / A) of the cold first compiled step over pairs with it on both."""
    ratios = []
    for _key, a, b in paired(store.iter_outcomes(run_a), store.iter_outcomes(run_b)):
        if a is None or b is None:
            continue
        x, y = metrics(a).get(COMPILE_FIGURE), metrics(b).get(COMPILE_FIGURE)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x > 0 and y > 0:
            ratios.append(y / x)
    past = sum(r > COMPILE_RATIO or 1 / r > COMPILE_RATIO for r in ratios)
    return {
        "ratio": statistics.median(ratios) if ratios else None,
        "pairs": len(ratios),
        "past_line": past,
        "line": COMPILE_RATIO,
    }


def _headline(baseline: str, other: str, cmp: Comparison, wait: dict) -> str:
    run = cmp.run_b
    where = f"{baseline} -> {other} on {run.get('device')}, suite {run.get('suite')}"
    parts = [
        f"{len(cmp.newly_failing)} newly failing",
        f"{len(cmp.newly_passing)} fixed",
    ]
    if cmp.failure_changed:
        parts.append(f"{len(cmp.failure_changed)} failing differently")
    if cmp.host_ops:
        parts.append(f"{len(cmp.host_ops)} host ops changed")
    if cmp.parity:
        parts.append(f"{len(cmp.parity)} parity figures drifted")
    if cmp.memory:
        parts.append(f"{len(cmp.memory)} peak-memory changes past 10 %")
    if wait["ratio"] is not None:
        change = (wait["ratio"] - 1) * 100
        within = " (within the 1.15x line)" if not wait["past_line"] else ""
        parts.append(f"compile wait {change:+.0f} % over {wait['pairs']} pairs{within}")
    else:
        parts.append("compile wait not measured")
    slower, faster = cmp.perf_verdicts.get(SLOWER, 0), cmp.perf_verdicts.get(FASTER, 0)
    within_n = cmp.perf_verdicts.get(WITHIN, 0)
    if slower or faster:
        parts.append(f"step time: {slower} slower, {faster} faster, {within_n} within noise")
    elif within_n:
        parts.append(f"step time within noise ({within_n} pairs)")
    else:
        parts.append("step time not judged")
    return f"{where}: " + ", ".join(parts) + f" ({cmp.common} pairs in both runs)"


def release_note(
    store,
    matrix: str,
    sides: list[tuple[str, str | None, str | None]],
    problems: list[str] | None = None,
) -> ReleaseNote:
    """``sides``: (environment name, run id or None, lock text or None), the baseline first;
    each other side with a run is compared with the baseline."""
    note = ReleaseNote(matrix=matrix, problems=list(problems or []))
    base_name, base_run, base_lock = sides[0]
    if base_run is None:
        note.problems.append(f"the baseline {base_name} has no run: nothing to compare")
        return note
    for name, run_id, lock in sides[1:]:
        if run_id is None:
            continue
        cmp = compare_runs(store, base_run, run_id)
        wait = compile_wait(store, base_run, run_id)
        note.pairs.append(
            PairNote(
                baseline=base_name,
                other=name,
                run_a=base_run,
                run_b=run_id,
                headline=_headline(base_name, name, cmp, wait),
                counts={
                    "newly_failing": len(cmp.newly_failing),
                    "fixed": len(cmp.newly_passing),
                    "failure_changed": len(cmp.failure_changed),
                    "host_ops": len(cmp.host_ops),
                    "parity": len(cmp.parity),
                    "perf_slower": cmp.perf_verdicts.get(SLOWER, 0),
                    "perf_faster": cmp.perf_verdicts.get(FASTER, 0),
                    "perf_within": cmp.perf_verdicts.get(WITHIN, 0),
                    "common": cmp.common,
                },
                compile_wait=wait,
                packages=package_changes(base_lock, lock),
                comparison=cmp,
            )
        )
    return note


def packages_view(pair: PairNote, limit: int | None = 20) -> View | None:
    if not pair.packages:
        return None
    rows = [[p["name"], p["a"] or "-", p["b"] or "-"] for p in pair.packages]
    notes = []
    if limit is not None and len(rows) > limit:
        notes.append(f"first {limit} of {len(rows)} packages that differ (--json: every one)")
        rows = rows[:limit]
    return View(
        f"Packages: {pair.baseline} -> {pair.other}",
        (Column("package"), Column(pair.baseline), Column(pair.other)),
        rows,
        notes,
    )
