"""Probe ``compile``: what compiling costs before the first compiled step (compile mode only).

It measures the wait a user meets in a new process, never one softened by what an earlier
case left behind:

cold    a new process with new, empty compile caches (``adapter.cache_dirs``: Inductor, Triton,
        the backend's own): eager first step, first compiled step, dynamo's phase times,
        graphs and ops per graph, graph breaks with reason and user stack, frames left eager.
        The sweep runs each compile-mode task in such a worker when this probe is on
        (``cold_worker``), so the ladder's own first compiled step is the cold measurement
        (``Subject.cold_compile``) and is not paid twice. Without it (a worker that compiled
        before) a cold child (``compile_child``) measures it instead.
warm    a second new process over the cache the cold one filled; its cache hit/miss counters
        say whether it was really warm (``warm_proven``).
shapes  with ``--shapes``: recompiles per new size, static and dynamic (``compile_shapes``).

Every child is held to ``--compile-timeout`` while compiling (then the result is
``compile_timeout`` at stage ``compile``) and to what is left of the case's time. Figures a
torch release does not provide are recorded as "unavailable: <reason>", never as zero.
Everything lands in ``findings["compile"]``; headline numbers also in metrics (``compile_*``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from torchport.instruments.compile_metrics import (
    backend_warm_verdict,
    is_unavailable,
    unavailable,
    warm_verdict,
)
from torchport.instruments.compile_run import Child, ChildOutcome
from torchport.probes.base import Probe, ProbeReport, Subject
from torchport.records.status import COMPILE_STOPS
from torchport.timing import clock

# Seconds kept back from the case deadline so the worker can still report after a child.
DEADLINE_MARGIN_S = 5.0
TAIL_CHARS = 1500
PHASE_METRICS = ("dynamo", "aot_autograd", "inductor", "codegen", "kernel_compile", "backward")


class CompileProbe(Probe):
    name = "compile"
    version = 2
    cold_worker = True

    def applies(self, subject: Subject) -> bool:
        return subject.mode == "compile"

    def run(self, subject: Subject) -> ProbeReport:
        from torchport.execution.compile_backend import choose

        config, adapter = subject.config, subject.adapter
        backend = choose(adapter, config.compile_backend).name
        spec: dict[str, Any] = {
            "suite": config.suite,
            "workload": config.workload,
            "case": subject.case.id,
            "device": config.device,
            "dtype": config.dtype,
            "seed": config.seed,
            "batch": config.batch,
            "seq": config.seq,
            "backend": backend,
            "compile_mode": config.compile_mode,
        }
        deadline = case_deadline(subject)
        # The child's own watchdog: it ends itself a little after the deadline it is held to.
        spec["deadline_s"] = max(deadline - clock(), 1.0) + DEADLINE_MARGIN_S
        tasks: tuple[str, ...] = ("cold", "warm", "shapes") if config.shapes else ("cold", "warm")
        root = tempfile.mkdtemp(prefix="torchport-compile-")
        found: dict[str, dict] = {}
        if subject.cold_compile is not None:
            # The ladder already compiled cold in this fresh worker: its cache (named in this
            # process's environment) is the one the warm child must find.
            found["cold"] = {**subject.cold_compile, "measured_by": "ladder"}
            tasks, env = tasks[1:], dict(os.environ)
        else:
            env = {**os.environ, **adapter.cache_dirs(root)}  # read by the child's torch
        children: dict[str, Child] = {}
        try:
            # All children start at once and wait, built, for a go: their imports and builds
            # overlap, and each measured part then runs alone on the machine.
            for task in tasks:
                children[task] = Child(
                    {**spec, "task": task, "hold": True, "shapes": config.shapes}, env, root
                )
            for child in children.values():
                child.wait_ready(deadline)
            for task, child in children.items():
                if task != "cold" and found["cold"].get("status") != "ok":
                    break  # warm needs what cold leaves behind; shapes, a working compile
                subject.emit({"event": "stage", "stage": f"probe:compile:{task}"})
                child.go()
                found[task] = child_findings(
                    child.finish(deadline, config.compile_timeout_s), config
                )
                found[task].setdefault("measured_by", "child")
        finally:
            for child in children.values():
                child.kill()
            shutil.rmtree(root, ignore_errors=True)
        return build_report(found, backend, config)


def case_deadline(subject: Subject) -> float:
    """The clock time the children must finish by.

    A subject that carries ``case_deadline`` (a ``timing.clock`` value) gives it; otherwise
    the probe cannot see how long the ladder took and allows one case's time from now. Either
    way the supervisor's own case deadline still bounds the worker.
    """
    given = getattr(subject, "case_deadline", None)
    end = given if given is not None else clock() + subject.config.timeout_s
    return end - DEADLINE_MARGIN_S


def child_findings(outcome: ChildOutcome, config) -> dict:
    """What one child gave, or why it gave nothing: always data, with the time it took."""
    if outcome.ended == "result":
        assert outcome.result is not None  # a child that reported gave its result
        found = dict(outcome.result)
        if found.get("status") != "ok" and found.get("error"):
            found["error"] = {
                **found["error"],
                "traceback": (found["error"].get("traceback") or "")[-TAIL_CHARS:],
            }
    elif outcome.ended == "compile_timeout":
        found = {
            "status": "compile_timeout",
            "stage": "compile",
            "error": {
                "type": "Timeout",
                "message": f"compilation ran past its {config.compile_timeout_s:g}"
                " s limit (--compile-timeout); the child process was killed",
            },
        }
    elif outcome.ended == "deadline":
        found = {
            "status": unavailable(f"stopped at the case deadline during stage '{outcome.stage}'")
        }
    else:
        found = {
            "status": "crash",
            "stage": outcome.stage,
            "error": {
                "type": "ChildCrash",
                "message": f"the compile child died ({outcome.exit}) during "
                f"stage '{outcome.stage}'",
                "traceback": outcome.tail[-TAIL_CHARS:],
            },
        }
    if outcome.records and found.get("status") != "ok":  # what completed before it ended
        found.setdefault("records", outcome.records)
    found["elapsed_s"] = outcome.elapsed_s
    return found


# The warm child repeats the cold one's graphs and breaks; keep only what differs.
WARM_KEYS = (
    "status",
    "stage",
    "error",
    "measured_by",
    "first_step_s",
    "second_step_s",
    "eager_first_step_s",
    "cache",
    "backend_cache",
    "phases_s",
    "graph_count",
    "elapsed_s",
)


def build_report(found: dict[str, dict], backend: str, config) -> ProbeReport:
    """``found``: per task ("cold", "warm", "shapes"), what it gave (``child_findings``)."""
    found = dict(found)
    if "warm" in found:
        found["warm"] = {k: v for k, v in found["warm"].items() if k in WARM_KEYS}
    cold = found["cold"]
    warm = found.get("warm") or {"status": unavailable("not run: the cold compile did not succeed")}
    findings = {
        "backend": backend,
        "compile_timeout_s": config.compile_timeout_s,
        "cold": cold,
        "warm": warm,
    }
    metrics: dict[str, float] = {}
    if cold.get("status") == "ok":
        metrics.update(cold_metrics(cold))
        findings["graph_breaks"] = cold["graph_breaks"]
    if warm.get("status") == "ok":
        metrics["compile_warm_first_step_s"] = warm["first_step_s"]
        findings["warm_proven"], findings["warm_check"] = warm_verdict(
            warm["cache"], cold.get("cache", unavailable("no cold run"))
        )
        own = backend_warm_verdict(warm.get("backend_cache"))
        if own is not None and not findings["warm_proven"]:
            # A backend that compiles outside Inductor (openxla, tpu) proves warmth with its
            # own cache; Inductor's counters had nothing to say.
            findings["warm_proven"], findings["warm_check"] = (
                own[0],
                f"{own[1]} (dynamo/Inductor: {findings['warm_check']})",
            )
    if config.shapes:
        findings["shapes"] = shapes_findings(found.get("shapes"))
        metrics.update(shapes_metrics(findings["shapes"]))
    report = ProbeReport(metrics=metrics, findings={"compile": findings})
    failed = next(
        (
            (name, f)
            for name, f in found.items()
            if f.get("status") not in ("ok", None) and not is_unavailable(f.get("status"))
        ),
        None,
    )
    if failed:
        name, f = failed
        error = dict(f.get("error") or {"type": f["status"], "message": f["status"]})
        error["message"] = f"{name} compile child: {error.get('message')}"
        report.error = {**error, "probe": "compile"}
        # A compile that ran past the limit, or failed, in a fresh process is the case's
        # outcome too; other child failures stay probe errors.
        if f["status"] in COMPILE_STOPS:
            report.status, report.stage = f["status"], "compile"
    return report


def cold_metrics(cold: dict) -> dict:
    metrics = {
        "compile_cold_first_step_s": cold["first_step_s"],
        "compile_eager_first_step_s": cold["eager_first_step_s"],
        "compile_cold_second_step_s": cold["second_step_s"],
    }
    if isinstance(cold.get("phases_s"), dict):
        metrics.update(
            {
                f"compile_cold_{phase}_s": seconds
                for phase, seconds in cold["phases_s"].items()
                if phase in PHASE_METRICS
            }
        )
    if isinstance(cold.get("graph_count"), int):
        metrics["compile_graph_count"] = cold["graph_count"]
    if isinstance(cold.get("graph_breaks"), list):
        metrics["compile_graph_break_count"] = sum(b["count"] for b in cold["graph_breaks"])
    if isinstance(cold.get("eager_frames"), list):
        metrics["compile_eager_frame_count"] = len(cold["eager_frames"])
    return metrics


def shapes_findings(found: dict | None) -> dict:
    if found is None:
        return {"status": unavailable("not run: the cold compile did not succeed")}
    if found.get("status") == "ok":
        return found
    # Killed or failed part-way: keep the modes that completed (sent as records).
    return {
        **{k: v for k, v in found.items() if k != "records"},
        "completed": found.get("records", []),
    }


def shapes_metrics(shapes: dict) -> dict:
    metrics = {}
    for study in shapes.get("studies") or ():
        for mode in ("static", "dynamic"):
            data = study.get(mode) or {}
            if isinstance(data.get("recompiles"), int):
                metrics[f"compile_{mode}_{study['dim']}_recompile_count"] = data["recompiles"]
    return metrics
