"""An evaluation: one labelled group of runs (``torchport evaluate``) and its plan.

Every run of an evaluation carries the labels ``evaluation`` (its id), ``evaluation_part``
(which part of the protocol: smoke, ops, dist, ...) and ``evaluation_side`` (``device`` or
``reference``). The plan (what each part runs, what was left out for time and why) is kept as
a note on the group's first run, written by ``evaluate`` (author ``PLAN_AUTHOR``), so a
resumed evaluation and its scorecard read the plan that was printed.

The plan is sized here, from the knowledge base's past durations (each recorded result's wall
time, by device, case and mode; a prior per suite where nothing was recorded): parts in
priority order each get their first cases, then grow a case at a time while the estimate
fits. No torch: the candidates (the cases each part could run) come from the caller.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from datetime import datetime

LABEL, PART, SIDE = "evaluation", "evaluation_part", "evaluation_side"
DEVICE_SIDE, REFERENCE_SIDE = "device", "reference"
PLAN_AUTHOR = "torchport evaluate"
PLAN_PREFIX = "evaluation plan "
# A run's own cost besides its results: the worker's start (torch import, the device), the
# plan, the report. Measured on this project's 2-core machine: 10-20 s.
PART_OVERHEAD_S = 20.0
# The share of the budget the plan fills: estimates are medians, the rest is the margin.
FILL = 0.85


@dataclass
class Candidate:
    """A part the protocol could run: its cases in the order they are taken (the first
    ``minimum`` or none), the modes, the RunConfig fields, and the sides it runs on."""

    name: str
    question: str
    config: dict
    cases: list[str]
    modes: tuple[str, ...]
    prior_s: float  # seconds per result where the knowledge base has none
    sides: list[tuple[str, str]]  # (side, device)
    minimum: int = 1
    why_not: str | None = None  # set: the part cannot run here (shown as left out)


@dataclass
class PlannedPart:
    name: str
    side: str
    device: str
    question: str
    config: dict
    cases: list[str]
    modes: list[str]
    estimate_s: float
    measured: int  # results of the estimate taken from the knowledge base
    left_out: list[str] = field(default_factory=list)  # cases left out for time

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.side)


@dataclass
class Plan:
    evaluation: str
    device: str
    against: str | None
    budget_s: float
    workloads: list[str]
    parts: list[PlannedPart] = field(default_factory=list)
    left_out: list[dict] = field(default_factory=list)  # {part, side, why}
    created_at: str = ""
    planning_s: float = 0.0  # spent choosing the plan, counted against the budget

    @property
    def estimate_s(self) -> float:
        return sum(p.estimate_s for p in self.parts)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["estimate_s"] = self.estimate_s
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Plan:
        parts = [PlannedPart(**p) for p in data.get("parts") or []]
        keys = ("evaluation", "device", "against", "budget_s", "workloads", "left_out")
        return cls(
            **{k: data.get(k) for k in keys},  # type: ignore[arg-type]
            parts=parts,
            created_at=data.get("created_at") or "",
            planning_s=float(data.get("planning_s") or 0.0),
        )

    def note_text(self) -> str:
        return PLAN_PREFIX + json.dumps(self.to_dict(), sort_keys=True)


# -- durations --------------------------------------------------------------------------------
def wall_s(result: dict) -> float | None:
    try:
        start = datetime.fromisoformat(result["started_at"])
        end = datetime.fromisoformat(result["finished_at"])
    except (KeyError, TypeError, ValueError):
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds >= 0 else None


def _stages_s(result: dict) -> float | None:
    durations = result.get("durations") or {}
    values = [v for v in durations.values() if isinstance(v, (int, float)) and v >= 0]
    return sum(values) if values else None


class Durations:
    """Past wall times per result: by (device, case, mode), then (case, mode) anywhere."""

    def __init__(self, observed: list[tuple[str, str, str, float]]):
        by_device: dict[tuple[str, str, str], list[float]] = {}
        anywhere: dict[tuple[str, str], list[float]] = {}
        for device, case, mode, seconds in observed:
            by_device.setdefault((device, case, mode), []).append(seconds)
            anywhere.setdefault((case, mode), []).append(seconds)
        self.by_device = {k: statistics.median(v) for k, v in by_device.items()}
        self.anywhere = {k: statistics.median(v) for k, v in anywhere.items()}

    @classmethod
    def from_store(cls, store, *, most_results: int = 20_000) -> Durations:
        """Every recorded result's wall time, from runs of up to ``most_results`` results
        (a sweep of 100 000 op results is not read to size a plan): in a serial run, the
        time from the result before it finished (its worker's start is the part's
        overhead, so a run's first result counts its own stages' durations)."""
        observed = []
        for run in store.runs():
            if sum((run.get("counts") or {}).values()) > most_results:
                continue
            device = run["device"].split(":")[0]
            serial = (run.get("config") or {}).get("jobs", 1) == 1
            results = sorted(
                store.results(run_id=run["id"]), key=lambda r: r.get("finished_at") or ""
            )
            before = None
            for r in results:
                seconds = wall_s({"started_at": before, "finished_at": r.get("finished_at")})
                if not serial or seconds is None:
                    seconds = _stages_s(r)
                before = r.get("finished_at")
                if seconds is not None and r["status"] != "skip":
                    observed.append((device, r["case"], r["mode"], seconds))
        return cls(observed)

    def estimate(self, device: str, case: str, mode: str, prior_s: float) -> tuple[float, bool]:
        """(seconds, measured): this device's median, else any device's, else the prior."""
        family = device.split(":")[0]
        if (family, case, mode) in self.by_device:
            return self.by_device[(family, case, mode)], True
        if (case, mode) in self.anywhere:
            return self.anywhere[(case, mode)], True
        return prior_s, False


# -- sizing -----------------------------------------------------------------------------------
def _case_cost(c: Candidate, case: str, durations: Durations) -> list[tuple[float, int]]:
    """(seconds, measured results) of one case on each side."""
    out = []
    for _, device in c.sides:
        total, measured = 0.0, 0
        for mode in c.modes:
            seconds, known = durations.estimate(device, case, mode, c.prior_s)
            total += seconds
            measured += known
        out.append((total, measured))
    return out


def size_plan(
    evaluation: str,
    *,
    device: str,
    against: str | None,
    budget_s: float,
    workloads: list[str],
    candidates: list[Candidate],
    durations: Durations,
) -> Plan:
    """Choose and size the parts to fit ``FILL`` of ``budget_s``: each part in priority order
    gets its first ``minimum`` cases if they fit (else it is left out, with the time it needed
    and the time left); then the chosen parts grow a case at a time, round robin in priority
    order, while the estimate fits. A part's sides grow together (a speed ratio compares the
    same cases)."""
    target = budget_s * FILL
    plan = Plan(evaluation, device, against, budget_s, list(workloads))
    plan.created_at = datetime.now().astimezone().isoformat(timespec="seconds")
    spent = 0.0
    chosen: dict[str, list[str]] = {}
    costs: dict[str, dict[str, list[tuple[float, int]]]] = {}
    for c in candidates:
        if c.why_not:
            for side, _ in c.sides:
                plan.left_out.append({"part": c.name, "side": side, "why": c.why_not})
            continue
        costs[c.name] = {case: _case_cost(c, case, durations) for case in c.cases}
        first = c.cases[: c.minimum]
        need = sum(PART_OVERHEAD_S + sum(costs[c.name][k][i][0] for k in first)
                   for i in range(len(c.sides)))  # fmt: skip
        if not first:
            plan.left_out.append({"part": c.name, "side": "-", "why": "no cases to run"})
        elif spent + need <= target:
            chosen[c.name] = list(first)
            spent += need
        else:
            plan.left_out.append(
                {
                    "part": c.name,
                    "side": "+".join(s for s, _ in c.sides),
                    "why": f"out of time: needs ~{need:.0f} s, {max(target - spent, 0):.0f} s "
                    f"of the plan's {target:.0f} s left",
                }
            )
    growing = [c for c in candidates if c.name in chosen]
    grew = True
    while grew:
        grew = False
        for c in growing:
            taken = chosen[c.name]
            if len(taken) >= len(c.cases):
                continue
            case = c.cases[len(taken)]
            need = sum(s for s, _ in costs[c.name][case])
            if spent + need <= target:
                taken.append(case)
                spent += need
                grew = True
    for c in growing:
        taken = chosen[c.name]
        for i, (side, side_device) in enumerate(c.sides):
            seconds = PART_OVERHEAD_S + sum(costs[c.name][k][i][0] for k in taken)
            plan.parts.append(
                PlannedPart(
                    name=c.name,
                    side=side,
                    device=side_device,
                    question=c.question,
                    config=dict(c.config),
                    cases=list(taken),
                    modes=list(c.modes),
                    estimate_s=round(seconds, 1),
                    measured=sum(costs[c.name][k][i][1] for k in taken),
                    left_out=[k for k in c.cases if k not in taken],
                )
            )
    return plan


# -- the group in the knowledge base ----------------------------------------------------------
@dataclass
class Group:
    """An evaluation as recorded: its plan and its runs by (part, side)."""

    plan: Plan
    runs: dict[tuple[str, str], dict]  # (part, side) -> run (header, labels)
    notes: list[dict]  # the notes on its runs, the plan's own left out

    def run_of(self, part: str, side: str = DEVICE_SIDE) -> dict | None:
        return self.runs.get((part, side))


def plan_note(notes: list[dict]) -> dict | None:
    for note in notes:
        if note.get("author") == PLAN_AUTHOR and (note.get("text") or "").startswith(PLAN_PREFIX):
            return note
    return None


def evaluation_runs(store, evaluation: str) -> list[dict]:
    """The group's runs, oldest first (any state)."""
    ids = [r["id"] for r in store.runs(labels={LABEL: evaluation}, complete=False)]
    return [store.get_run(i, plan=False) for i in reversed(ids)]


def load_group(store, evaluation: str) -> Group:
    """The recorded evaluation; LookupError when no run carries its label or its plan."""
    runs = evaluation_runs(store, evaluation)
    if not runs:
        raise LookupError(
            f"no evaluation '{evaluation}' in this knowledge base (no run with label "
            f"{LABEL}={evaluation}); 'torchport runs' lists the runs and their labels"
        )
    notes = [n for r in runs for n in store.notes(run_id=r["id"])]
    found = plan_note(notes)
    if found is None:
        raise LookupError(
            f"evaluation '{evaluation}' has runs but no plan note (author '{PLAN_AUTHOR}'); "
            "it was not made by 'torchport evaluate'"
        )
    plan = Plan.from_dict(json.loads(found["text"].removeprefix(PLAN_PREFIX)))
    by_part = {}
    for run in runs:  # oldest first: a part run twice keeps its newest
        labels = run.get("labels") or {}
        by_part[(labels.get(PART, "?"), labels.get(SIDE, DEVICE_SIDE))] = run
    return Group(plan, by_part, [n for n in notes if n is not found])


def previous_evaluation(store, group: Group) -> str | None:
    """The newest other evaluation of the same device that started before this one."""
    started = min((r["started_at"] for r in group.runs.values()), default="")
    best: tuple[str, str] | None = None
    for run in store.runs():
        labels = run.get("labels") or {}
        other = labels.get(LABEL)
        if (
            not other
            or other == group.plan.evaluation
            or labels.get(SIDE) != DEVICE_SIDE
            or run["device"] != group.plan.device
            or run["started_at"] >= started
        ):
            continue
        if best is None or run["started_at"] > best[0]:
            best = (run["started_at"], other)
    return best[1] if best else None


def evaluations(store) -> list[dict]:
    """Every evaluation in the knowledge base, newest first: id, device, reference device,
    when its first run started and how many runs it has."""
    found: dict[str, dict] = {}
    for run in store.runs():  # newest first
        labels = run.get("labels") or {}
        name = labels.get(LABEL)
        if not name:
            continue
        entry = found.setdefault(
            name, {"evaluation": name, "device": None, "against": None, "runs": 0}
        )
        entry["runs"] += 1
        entry["started_at"] = run["started_at"]  # the oldest seen last
        if labels.get(SIDE) == REFERENCE_SIDE:
            entry["against"] = run["device"]
        else:
            entry["device"] = run["device"]
    return list(found.values())
