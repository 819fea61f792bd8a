"""A release note: what changed from the baseline environment to each other one, in a line
("torch-2.12.1 -> torch-2.13.0 on cpu, suite smoke: 3 newly failing, 1 fixed, compile wait
-12 %, step time within noise"), with the comparison (views/compare.py) behind every count.

Each count comes from the comparison of the two stored runs on the (case, mode) pairs both
recorded; step time is judged against each run's measured p10-p90 (views/noise.py). The
packages that differ between the two environments' locks come first.

The compile wait is the median ratio (B / A), over the pairs measured on both sides, of the
compile probe's cold first compiled step where both runs have it, else of what every compiled
result records without that probe: the compile stage's duration (the first compiled step,
compile included). Each is one measurement a side, so the change is judged against the wider
of PyTorch HUD's 1.15x line and the one-shot noise each run measured: every case's first
eager step is timed twice in a run (once in each mode, the same work), and the p90 of those
two timings' ratio is how far apart two one-shot timings of the same work land on that
machine. Two runs whose compile caches started in different states (labels ``compile_cache``)
are not judged. "not measured" names the side that recorded no compiled step.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from torchport.views.base import Column, View
from torchport.views.compare import (
    COMPILE_RATIO,
    Comparison,
    compare_runs,
)
from torchport.views.noise import FASTER, SLOWER, WITHIN

COMPILE_FIGURE = "compile_cold_first_step_s"  # the compile probe's: a cold first step
STAGE_FIGURE = "compile_s"  # durations: the compile stage, the first compiled step
FIGURE_NAMES = {COMPILE_FIGURE: "cold first compiled step", STAGE_FIGURE: "compile stage"}


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
    run_name: str | None = None  # which of the environments' runs (None: their one run)

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


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _compile_record(store, run_id: str) -> tuple[dict, float | None]:
    """({(case, mode): {figure: seconds}}, one-shot noise factor or None) of a run."""
    figures: dict[tuple[str, str], dict[str, float]] = {}
    first_steps: dict[str, list[float]] = defaultdict(list)  # case -> first eager steps (s)
    for r in store.results(run_id=run_id):
        m, d = r.get("metrics") or {}, r.get("durations") or {}
        found = {}
        if _positive(m.get(COMPILE_FIGURE)):
            found[COMPILE_FIGURE] = m[COMPILE_FIGURE]
        if _positive(d.get(STAGE_FIGURE)) and "compiled_run_s" in d:  # the compile stage passed
            found[STAGE_FIGURE] = d[STAGE_FIGURE]
        if found:
            figures[(r["case"], r["mode"])] = found
        if _positive(d.get("run_s")):
            first_steps[r["case"]].append(d["run_s"])
    spreads = [
        math.log(max(steps) / min(steps)) for steps in first_steps.values() if len(steps) >= 2
    ]
    if not spreads:
        return figures, None
    p90 = statistics.quantiles(spreads, n=10)[-1] if len(spreads) >= 2 else spreads[0]
    return figures, math.exp(max(p90, 0.0))


def compile_wait(store, run_a: str, run_b: str, names: tuple[str, str] = ("A", "B")) -> dict:
    """The compile wait's change from run A to run B (the module's docstring): ratio (median
    B / A), pairs, figure, noise, line, verdict; ratio None with ``why`` when not measured."""
    fig_a, noise_a = _compile_record(store, run_a)
    fig_b, noise_b = _compile_record(store, run_b)
    out: dict = {"ratio": None, "pairs": 0, "past_line": 0, "line": COMPILE_RATIO}
    missing = [n for n, f in zip(names, (fig_a, fig_b), strict=True) if not f]
    if missing:
        out["why"] = " and ".join(missing) + " recorded no compiled step"
        return out
    common = sorted(set(fig_a) & set(fig_b))
    both = [k for k in common if COMPILE_FIGURE in fig_a[k] and COMPILE_FIGURE in fig_b[k]]
    figure = COMPILE_FIGURE if both else STAGE_FIGURE
    keys = both or [k for k in common if STAGE_FIGURE in fig_a[k] and STAGE_FIGURE in fig_b[k]]
    if not keys:
        out["why"] = "no (case, mode) compiled on both sides"
        return out
    ratios = [fig_b[k][figure] / fig_a[k][figure] for k in keys]
    noises = [n for n in (noise_a, noise_b) if n is not None]
    noise = max(noises) if noises else None
    line = max(COMPILE_RATIO, noise or 0.0)
    ratio = statistics.median(ratios)
    caches = [(store.get_run(r).get("labels") or {}).get("compile_cache") for r in (run_a, run_b)]
    if None not in caches and caches[0] != caches[1]:
        verdict = "not judged"
        out["why_not_judged"] = (
            f"compile caches started {caches[0]} in {names[0]} and {caches[1]} in {names[1]}"
        )
    elif ratio > line:
        verdict = "slower"
    elif ratio < 1 / line:
        verdict = "faster"
    else:
        verdict = "within noise"
    out.update(
        ratio=ratio,
        pairs=len(ratios),
        past_line=sum(r > line or 1 / r > line for r in ratios),
        line=line,
        figure=figure,
        noise=noise,
        noise_measured=len(noises),
        verdict=verdict,
        caches=caches,
    )
    return out


def _wait_part(wait: dict) -> str:
    if wait["ratio"] is None:
        return f"compile wait not measured ({wait['why']})"
    change = (wait["ratio"] - 1) * 100
    figure = FIGURE_NAMES[wait["figure"]]
    head = f"compile wait {change:+.0f} % over {wait['pairs']} pairs ({figure}"
    if wait["verdict"] == "not judged":
        return f"{head}; not judged: {wait['why_not_judged']})"
    against = (
        f"line {wait['line']:.2f}x: the measured one-shot noise"
        if wait["noise"] is not None and wait["noise"] > COMPILE_RATIO
        else f"the {COMPILE_RATIO}x line"
        + ("" if wait["noise"] is not None else ", one-shot noise not measured")
    )
    return f"{head}; {wait['verdict']} against {against})"


def _headline(
    baseline: str, other: str, cmp: Comparison, wait: dict, run_name: str | None = None
) -> str:
    run = cmp.run_b
    which = f", run {run_name}," if run_name else ""
    where = f"{baseline} -> {other}{which} on {run.get('device')}, suite {run.get('suite')}"
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
    parts.append(_wait_part(wait))
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
    run_name: str | None = None,
) -> ReleaseNote:
    """``sides``: (environment name, run id or None, lock text or None), the baseline first;
    each other side with a run is compared with the baseline. ``run_name``: which of the
    environments' runs these are (said in each line; None: their one run)."""
    note = ReleaseNote(matrix=matrix, problems=list(problems or []))
    base_name, base_run, base_lock = sides[0]
    if base_run is None:
        which = f" {run_name}" if run_name else ""
        note.problems.append(f"the baseline {base_name} has no run{which}: nothing to compare")
        return note
    for name, run_id, lock in sides[1:]:
        if run_id is None:
            continue
        cmp = compare_runs(store, base_run, run_id)
        wait = compile_wait(store, base_run, run_id, (base_name, name))
        note.pairs.append(
            PairNote(
                baseline=base_name,
                other=name,
                run_a=base_run,
                run_b=run_id,
                headline=_headline(base_name, name, cmp, wait, run_name),
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
                run_name=run_name,
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


def run_wall_s(run: dict) -> float | None:
    """A stored run's wall time, started to finished (None while unfinished)."""
    from datetime import datetime

    if not run.get("started_at") or not run.get("finished_at"):
        return None
    finished = datetime.fromisoformat(run["finished_at"])
    return (finished - datetime.fromisoformat(run["started_at"])).total_seconds()


def run_counts(store, run_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """(results by status, results by placement grade) of a stored run, most first."""
    statuses: Counter[str] = Counter()
    grades: Counter[str] = Counter()
    for r in store.statuses(run_id, outcomes=True):
        statuses[r["status"]] += 1
        if r.get("grade"):
            grades[r["grade"]] += 1
    return dict(statuses.most_common()), dict(grades.most_common())


def runs_view(store, runs: list[tuple[str, str | None, str | None]]) -> View:
    """Every run of a matrix in one table: (environment, run name, run id) -> its device,
    suite, results by status, placement grades and wall time (started to finished)."""
    rows: list[list] = []
    for env, name, run_id in runs:
        if run_id is None:
            rows.append([env, name or "-", None, None, None, "no run", "-", None])
            continue
        run = store.get_run(run_id)
        statuses, grades = run_counts(store, run_id)
        wall = run_wall_s(run)
        rows.append(
            [
                env,
                name or "-",
                run_id,
                run.get("device"),
                run.get("suite"),
                ", ".join(f"{k} {v}" for k, v in statuses.items()) or "none",
                ", ".join(f"{k} {v}" for k, v in grades.items()) or "-",
                wall,
            ]
        )
    return View(
        "Runs",
        (
            Column("environment"),
            Column("run"),
            Column("run id"),
            Column("device"),
            Column("suite"),
            Column("results"),
            Column("grades"),
            Column("wall", "s"),
        ),
        rows,
    )
