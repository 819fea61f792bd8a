"""``torchport evaluate``'s library side: the protocol's parts, its plan, and the runs.

The protocol (views/evaluation.py sizes it): the smoke models eager and compiled with the
compile probe; the team's own workloads (``--workload``) the same way with training steps; a
sample of the OpInfo ops; the ``generate`` scenario; hot spots; FlexAttention; ``dist`` at the
world the machine allows (``api.dist_world_size``); a sample of ``hf`` with what is left. The
parts with step times also run on the reference device (``against``), the same cases; the
others are judged against the CPU float64 reference already. Each part is one ``api.run``
with the evaluation's labels, so every part is resumable as any run is, and an interrupted
evaluation picks up where it stopped (``resume``): finished parts are kept, an interrupted one
is resumed, the rest run.

The budget is kept twice: the plan is sized to it up front, and a timer ends the part still
running when the budget is spent (the run is then ``interrupted``, resumable, and the
scorecard says what was not evaluated).
"""

from __future__ import annotations

import os
import random
import secrets
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from torchport.config import ConfigError
from torchport.views.evaluation import (
    DEVICE_SIDE,
    LABEL,
    PART,
    PLAN_AUTHOR,
    REFERENCE_SIDE,
    SIDE,
    Candidate,
    Durations,
    Plan,
    PlannedPart,
    load_group,
    size_plan,
)

# Seconds per result where the knowledge base has none (2-core CPU figures of this project,
# probes included: a compile probe's cold and warm compiles dominate the model parts).
PRIORS_S = {
    "smoke": 45.0,
    "workload": 60.0,
    "ops": 4.0,
    "generate": 60.0,
    "hotspots": 30.0,
    "flex": 30.0,
    "dist": 90.0,
    "hf": 60.0,
}
PERF_BUDGET_S = 1.0  # seconds of timed steps per side of the perf probe
TRAIN_STEPS = 3  # training-loss parity steps on the team's workloads
# Kept back from the budget for what comes after the runs: stopping the part still running
# (its workers killed, its run recorded as interrupted), the scorecard and the report, and
# the command's own start. Measured on this project's 2-core machine under a load of 15-20:
# 22 s to stop a dist part, 10 s for the scorecard and report.
RESERVE_S = 60.0
DIST_FIRST = ("dist/collectives", "dist/ddp/mlp", "dist/fsdp2/mlp", "dist/tp/mlp")


def new_evaluation_id() -> str:
    return "ev-" + datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def _suite_cases(suite: str, *, workload: str | None = None, globs: tuple = ()) -> list[str]:
    from torchport.cases.registry import load_suite, select

    return [c.id for c in select(load_suite(suite, workload=workload), globs, ())]


def _shuffled(cases: list[str], seed: int = 0) -> list[str]:
    """A fixed spread of a large suite: the first N are a sample, the same every time."""
    out = list(cases)
    random.Random(seed).shuffle(out)
    return out


def _probes(device: str, side: str, wanted: tuple[str, ...]) -> tuple[str, ...]:
    """The device side measures what the part asks; the reference side only its step times
    (and the serving figures of generate); placement means nothing on the host."""
    chosen = wanted if side == DEVICE_SIDE else tuple(p for p in wanted if p in ("perf", "serve"))
    if device.split(":")[0] == "cpu":
        chosen = tuple(p for p in chosen if p != "placement")
    return chosen


def candidates(
    device: str, against: str | None, workloads: list[str], world: tuple[int, str] = (2, "")
) -> list[Candidate]:
    """The protocol's parts in priority order, each with the cases it could run. ``world``:
    the dist part's world size and why (``api.dist_world_size``)."""
    both = [(DEVICE_SIDE, device)] + ([(REFERENCE_SIDE, against)] if against else [])
    alone = [(DEVICE_SIDE, device)]
    model = ("placement", "perf", "compile")
    out = [
        Candidate(
            "smoke",
            "runs eager and compiled? numbers? on the device? compile wait? speed?",
            {"suite": "smoke", "probes": model},
            _suite_cases("smoke"),
            ("eager", "compile"),
            PRIORS_S["smoke"],
            both,
        )
    ]
    for spec in workloads:
        out.append(
            Candidate(
                f"workload:{spec}",
                "your own model: runs, numbers, training loss, compile wait, speed",
                {
                    "suite": "workload",
                    "workload": spec,
                    "probes": (*model, "train"),
                    "train_steps": TRAIN_STEPS,
                },
                _suite_cases("workload", workload=spec),
                ("eager", "compile"),
                PRIORS_S["workload"],
                both,
            )
        )
    ops = _shuffled(_suite_cases("ops", globs=("ops/*/float32",)))
    out.append(
        Candidate(
            "ops",
            "which operators run natively, fall back to the host, or fail",
            {"suite": "ops", "probes": None},
            ops,
            ("eager",),
            PRIORS_S["ops"],
            alone,
            minimum=min(10, len(ops)),
        )
    )
    out.append(
        Candidate(
            "generate",
            "prefill and greedy decode with a KV cache: token parity, TTFT, TPOT",
            {"suite": "smoke", "scenario": "generate", "probes": ("placement", "serve")},
            ["hf/llama", "hf/gpt2", "hf/qwen3_moe"],
            ("eager",),
            PRIORS_S["generate"],
            both,
        )
    )
    out.append(
        Candidate(
            "hotspots",
            "where would custom kernels pay (ops against the roofline)",
            {"suite": "smoke", "probes": ("hotspots",)},
            ["hf/llama", "smoke/mlp", "hf/gpt2", "smoke/convnet"],
            ("eager",),
            PRIORS_S["hotspots"],
            alone,
        )
    )
    out.append(
        Candidate(
            "flex",
            "FlexAttention variants, eager and compiled",
            {"suite": "flex", "probes": None},
            _shuffled(_suite_cases("flex")),
            ("eager", "compile"),
            PRIORS_S["flex"],
            both,
        )
    )
    dist = _suite_cases("dist")
    dist_order = [c for c in DIST_FIRST if c in dist] + [c for c in dist if c not in DIST_FIRST]
    out.append(
        Candidate(
            "dist",
            f"collectives and DDP / FSDP2 / TP training parity at a world of {world[0]}"
            + (f" ({world[1]})" if world[1] else ""),
            {"suite": "dist", "world_size": world[0], "probes": "none"},
            dist_order,
            ("eager",),
            PRIORS_S["dist"],
            alone,
        )
    )
    out.append(
        Candidate(
            "kernels",
            "replacement kernels inside the real model",
            {"suite": "kernels"},
            [],
            ("eager",),
            60.0,
            alone,
            why_not="the kernels suite's own cases are planted faults for self-tests; "
            "replacement kernels are given with --workload MODULE:FN (a @replacement "
            "factory), judged on the kernel ladder inside their workload part",
        )
    )
    smoke = set(_suite_cases("smoke"))
    hf = _shuffled([c for c in _suite_cases("hf") if c not in smoke])
    out.append(
        Candidate(
            "hf",
            "a sample of the Hugging Face causal-LM architectures",
            {"suite": "hf", "probes": ("placement", "perf")},
            hf,
            ("eager", "compile"),
            PRIORS_S["hf"],
            both,
        )
    )
    return out


def make_plan(
    store,
    *,
    device: str,
    against: str | None,
    budget_s: float,
    workloads: list[str],
    evaluation: str | None = None,
) -> Plan:
    """The plan, sized to ``budget_s`` less RESERVE_S and the time choosing it takes (the ops and
    hf suites, reading past durations: ``Plan.planning_s``, spent from the budget)."""
    started = time.monotonic()
    from torchport import api

    parts = candidates(device, against, workloads, api.dist_world_size(device))
    durations = Durations.from_store(store)
    planning_s = time.monotonic() - started
    plan = size_plan(
        evaluation or new_evaluation_id(),
        device=device,
        against=against,
        budget_s=max(budget_s - planning_s - RESERVE_S, 0.0),
        workloads=workloads,
        candidates=parts,
        durations=durations,
    )
    plan.budget_s, plan.planning_s = budget_s, round(planning_s, 1)
    return plan


def part_config(part: PlannedPart, budget_s: float):
    from torchport import api
    from torchport.config import RunConfig

    values = {k: v for k, v in part.config.items() if k != "probes"}
    wanted = part.config.get("probes")
    if wanted is None or wanted == "none":
        probes = api.resolve_probes(part.device, wanted, scenario=values.get("scenario", "train"))
        if part.side == REFERENCE_SIDE:
            probes = _probes(part.device, part.side, probes)
    else:
        probes = _probes(part.device, part.side, tuple(wanted))
    if part.side == REFERENCE_SIDE:
        values.pop("train_steps", None)
    return RunConfig(
        **values,
        device=part.device,
        cases=tuple(part.cases),
        modes=tuple(part.modes),
        probes=probes,
        perf_budget_s=PERF_BUDGET_S,
        timeout_s=float(max(60, min(600, budget_s / 2))),
    )


@dataclass
class EvaluationOutcome:
    evaluation: str
    state: str = "complete"  # complete | interrupted
    stopped_by: str | None = None  # budget | signal | broken
    signal: int | None = None
    broken: str | None = None  # why a part's workers could not go on
    elapsed_s: float = 0.0
    runs: list[str] = field(default_factory=list)


class _Stop:
    """The evaluation's own SIGINT/SIGTERM handler (between parts) and the budget's timer,
    which ends the running part through the same signal api.run already handles."""

    def __init__(self, seconds: float):
        self.signum: int | None = None
        self.resent = False
        self.budget_spent = False
        self._timer = threading.Timer(max(seconds, 0.0), self._expire)
        self._timer.daemon = True

    def _expire(self) -> None:
        self.budget_spent = True
        os.kill(os.getpid(), signal.SIGTERM)

    def _handle(self, signum, frame) -> None:
        self.signum = signum

    def __enter__(self) -> _Stop:
        self._before = (
            signal.signal(signal.SIGTERM, self._handle),
            signal.signal(signal.SIGINT, self._handle),
        )
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        signal.signal(signal.SIGTERM, self._before[0])
        signal.signal(signal.SIGINT, self._before[1])


def _spent_s(runs: list[dict]) -> float:
    total = 0.0
    for run in runs:
        try:
            start = datetime.fromisoformat(run["started_at"])
            end = datetime.fromisoformat(run.get("finished_at") or run["started_at"])
        except (KeyError, TypeError, ValueError):
            continue
        total += max((end - start).total_seconds(), 0.0)
    return total


def evaluate(
    store,
    plan: Plan | None = None,
    *,
    resume: str | None = None,
    budget_s: float | None = None,
    started: float | None = None,
    labels: dict[str, str] | None = None,
    workload_folder: str | None = None,
    on_part: Callable[[PlannedPart, str], None] = lambda p, how: None,
    on_result: Callable[[object], None] = lambda r: None,
) -> EvaluationOutcome:
    """Run ``plan`` (or finish evaluation ``resume``) as one labelled group in ``store``.
    A resumed evaluation has what its budget left (``budget_s``: this much more instead).
    ``started``: when the command started (``time.monotonic``), so its time choosing the plan
    counts; the runs stop ``RESERVE_S`` before the budget ends."""
    from torchport import api

    already: dict[tuple[str, str], dict] = {}
    if resume:
        group = load_group(store, resume)
        plan = group.plan
        already = group.runs
    elif plan is None:
        raise ConfigError("evaluate needs a plan, or resume=EVALUATION")
    now = time.monotonic()
    since_start = now - started if started is not None else (0.0 if resume else plan.planning_s)
    left = budget_s if budget_s is not None else plan.budget_s - _spent_s(list(already.values()))
    outcome = EvaluationOutcome(plan.evaluation)
    with _Stop(left - since_start - RESERVE_S) as stop:
        for part in plan.parts:
            run = already.get(part.key)
            if run is not None and run["state"] == "complete":
                outcome.runs.append(run["id"])
                on_part(part, "done")
                continue
            if stop.signum is not None:  # a part left to run, and no time or leave to run it
                outcome.state, outcome.signal = "interrupted", stop.signum
                break
            part_labels = {
                **(labels or {}),
                LABEL: plan.evaluation,
                PART: part.name,
                SIDE: part.side,
            }
            written = bool(already) or bool(outcome.runs)

            def on_start(task, stop=stop):
                # A stop that came before api.run took the signals over: sent again, now
                # that the run ends cleanly on it (state interrupted, resumable).
                if stop.signum is not None and not stop.resent:
                    stop.resent = True
                    os.kill(os.getpid(), stop.signum)

            def on_plan(tasks, part_labels=part_labels, written=written):
                if not written:  # the group's first run holds the plan
                    first = [r["id"] for r in store.runs(labels=part_labels, complete=False)][0]
                    store.add_note(first, plan.note_text(), author=PLAN_AUTHOR)

            if run is not None:
                on_part(part, "resume")
                result = api.run(
                    None, store, resume=run["id"], on_result=on_result, on_start=on_start,
                    workload_folder=workload_folder,
                )  # fmt: skip
            else:
                on_part(part, "run")
                result = api.run(
                    part_config(part, plan.budget_s),
                    store,
                    labels=part_labels,
                    command=f"torchport evaluate ({plan.evaluation}: {part.name}, {part.side})",
                    workload_folder=workload_folder,
                    on_plan=on_plan,
                    on_start=on_start,
                    on_result=on_result,
                )
            outcome.runs.append(result.run_id)
            if result.broken:
                outcome.state, outcome.stopped_by = "interrupted", "broken"
                outcome.broken = result.broken
                break
            if result.state == "interrupted":
                outcome.state = "interrupted"
                outcome.signal = result.signal
                break
        if outcome.state == "interrupted" and outcome.stopped_by is None:
            outcome.stopped_by = "budget" if stop.budget_spent else "signal"
    outcome.elapsed_s = time.monotonic() - now
    return outcome
