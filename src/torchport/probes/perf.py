"""Perf: how fast one step runs once it runs, at the case's perf size.

Its own pass, with no recorder attached: the case is built again at its perf size (larger than
the parity size), placed, and in compile mode compiled afresh. After a warm-up, eager and
compiled steps are timed in alternating rounds (drift falls on both sides equally), the device
synchronised through its own API before each clock read (CUDA events where available).
Compile time is never in these figures: the first call of each side is made before timing.

A side whose spread or sample count is outside ``NOISE_LIMITS`` is flagged in
findings["perf"]["noisy"] (with why, and the host load recorded next to it), and a speedup
computed from a noisy side says so (``speedup_noisy``): such a figure is shown, never trusted
silently.

Training steps run in training mode (dropout and batch statistics on, with the device's own
random kernels: nothing is compared here), inference steps in eval mode.

Metrics (this mode's runner unless the name says eager/compiled):
  perf_median_ms perf_p10_ms perf_p90_ms perf_cv perf_samples
  perf_eager_median_ms perf_compiled_median_ms perf_speedup (eager / compiled, compile mode)
  perf_<name>_median_ms for each of the workload's ``alternatives`` (e.g. perf_sdpa_median_ms)
  perf_tokens_per_s perf_samples_per_s perf_flops_per_step perf_achieved_tflops perf_mfu
  perf_flops_6nt_per_step perf_mfu_6nt perf_peak_bytes
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from torchport.cases.base import Size, Workload
from torchport.instruments import flops as flops_mod
from torchport.probes.base import Probe, ProbeReport, Subject
from torchport.timing import Summary, sample_interleaved, step_timer, timed

# 2: FLOPs counted on the CPU reference; the timer's wait method. 3: noisy sides flagged,
# training steps in training mode. 4: noise judged by the robust spread (p10-p90 / median)
PROBE_VERSION = 4
WARMUP_ROUNDS = 3
# A side is noisy when its robust spread, (p10-p90) / median, is above max_spread, or it has
# fewer samples than min_samples: a median from a handful of scattered samples is not a figure
# to compare. 0.25 is what a CV of 10% gives for a normal sample (p90 - p10 = 2.56 sigma); a
# few large outliers move the CV (recorded still) but not this spread.
NOISE_LIMITS = {"max_spread": 0.25, "min_samples": 10}


@dataclass
class PerfSetup:
    """The case at its perf size on the device: the steps to time, by side."""

    workload: Workload
    model: Any
    sides: dict = field(default_factory=dict)  # "eager" / "compiled" -> zero-arg step
    mode_side: str = "eager"  # the side this mode's runner is
    size: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def step_kind(workload, with_optimizer: bool = False) -> str:
    if not workload.trains:
        return "inference forward"
    return "training step with optimizer" if with_optimizer else "training forward+backward"


def compile_fresh(subject: Subject, model):
    """A new torch.compile wrapper with the run's backend, static shapes.

    dynamic=False: the parity-size compile of the same code already ran, and dynamo's
    automatic dynamic shapes would otherwise compile a shape-generic graph for the perf size,
    which is not what a user running one shape gets.
    """
    from torchport.execution.compile_backend import choose

    config = subject.config
    return choose(subject.adapter, config.compile_backend, config.compile_mode).compile(
        model, dynamic=False
    )


def perf_setup(subject: Subject) -> PerfSetup:
    """Build the case again at its perf size, place it, and make the steps to time."""

    from torchport.execution.build import build_placed
    from torchport.execution.steps import make_step, place

    config = subject.config
    size = Size(perf=True, batch=config.batch, seq=config.seq)
    placed = build_placed(
        subject.case,
        seed=config.seed,
        size=size,
        device=subject.device,
        dtype=subject.dtype,
        host_scope=subject.adapter.host_scope,
    )
    model = placed.model
    setup = PerfSetup(
        workload=placed,
        model=model,
        size={
            "batch": config.batch,
            "seq": config.seq,
            "tokens": placed.tokens,
            "samples": placed.samples,
            "perf_size": True,
        },
    )
    setup.sides["eager"] = make_step(model, model, placed)
    if subject.mode == "compile":
        setup.sides["compiled"] = make_step(compile_fresh(subject, model), model, placed)
        setup.mode_side = "compiled"
    for name, other in placed.alternatives.items():  # e.g. SDPA for a FlexAttention case
        if name in setup.sides:
            raise ValueError(f"workload alternative '{name}' would hide the {name} side")
        other.train(placed.trains)  # the mode the case's own step runs in
        alt = place(dataclasses.replace(placed, model=other), subject.device, subject.dtype)
        setup.sides[name] = make_step(alt.model, alt.model, alt)
    return setup


class RecompileLimitWatch(logging.Handler):
    """Collects dynamo's "hit config.recompile_limit" warnings while active.

    Past its recompile limit dynamo silently runs that frame eagerly: a 'compiled' figure is
    then partly eager, which is what the user gets, but it must say so. The logger name and
    message are dynamo internals: if they change the watch sees nothing, which the test
    against the real warning (tests/probes/test_perf.py) catches.
    """

    LOGGER = "torch._dynamo.convert_frame"

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.hits: list[str] = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("torch._dynamo hit config."):
            lines = message.splitlines()
            self.hits.append(" ".join(line.strip() for line in lines[:2]))

    def __enter__(self):
        logging.getLogger(self.LOGGER).addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger(self.LOGGER).removeHandler(self)


def first_calls(setup: PerfSetup) -> dict[str, str]:
    """Call each side once (compiles happen here, outside timing); drop sides that raise."""
    failed = {}
    for name in list(setup.sides):
        try:
            setup.sides[name]()
        except Exception as exc:  # a side that cannot run has no figure; say why
            failed[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
            del setup.sides[name]
    return failed


def noisy(summary: Summary) -> list[str]:
    """Why a side's figures are noisy (empty: they are not)."""
    why = []
    if summary.spread > NOISE_LIMITS["max_spread"]:
        why.append(f"p10-p90 {summary.spread:.0%} of median > {NOISE_LIMITS['max_spread']:.0%}")
    if summary.n < NOISE_LIMITS["min_samples"]:
        why.append(f"n = {summary.n} < {NOISE_LIMITS['min_samples']}")
    return why


def host_load() -> dict:
    """How busy the host was: a shared machine's figures are noisy (the host drives every
    device, so this is recorded whatever the device)."""
    import torch

    return {
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def summary_dict(summary: Summary) -> dict:
    return {
        "n": summary.n,
        "median_ms": summary.median_s * 1e3,
        "p10_ms": summary.p10_s * 1e3,
        "p90_ms": summary.p90_s * 1e3,
        "mean_ms": summary.mean_s * 1e3,
        "min_ms": summary.min_s * 1e3,
        "cv": summary.cv,
        "spread": summary.spread,
    }


def reference_flops(subject: Subject) -> tuple[int | None, str]:
    """FLOPs of one step at the perf size, counted once on the CPU (device independent), in
    the reference child with its disk cache; (count, how it was counted)."""
    from torchport.execution import reference

    config = subject.config
    spec = flops_spec(subject.case, config)
    local = None if reference.rebuildable(subject.case, config) else subject.case
    with subject.adapter.host_scope():
        value = reference.obtain(spec, local)
    return value["flops"], f"{value['counted_on']} ({value.get('process')})"


def flops_spec(case, config):
    """The reference spec of a case's FLOP count at its perf size (the ladder asks the
    parity reference's child to cache it too: one child per case)."""
    from torchport.execution import reference

    size = Size(perf=True, batch=config.batch, seq=config.seq)
    return reference.spec_for(case, config, size, task="flops")


class PerfProbe(Probe):
    name = "perf"
    version = PROBE_VERSION

    def run(self, subject: Subject) -> ProbeReport:
        report = ProbeReport()
        config, adapter = subject.config, subject.adapter
        # where the probe's time goes besides its timed rounds (the perf-size build and, in
        # compile mode, its compile; the FLOP count's cache read; the peak-memory step)
        phases: dict[str, float] = {}
        setup, phases["setup_s"] = timed(lambda: perf_setup(subject))
        notes = setup.notes
        info: dict[str, Any] = {
            "step_kind": step_kind(setup.workload),
            "step_mode": "train" if setup.workload.trains else "eval",
            "size": setup.size,
            "notes": notes,
        }
        report.findings["perf"] = info
        info["phases_s"] = phases
        with RecompileLimitWatch() as watch:
            # compile mode: the perf-size compile
            failed, phases["first_calls_s"] = timed(lambda: first_calls(setup))
            if failed:
                info["failed_sides"] = failed
                notes.extend(
                    f"{side} step failed at the perf size: {why}" for side, why in failed.items()
                )
            if not setup.sides:
                return report
            timer = step_timer(adapter, steady=True)  # training steps repeat: a loop's timing
            spent: dict = {}
            samples = sample_interleaved(
                setup.sides,
                timer,
                budget_s=config.perf_budget_s,
                warmup=WARMUP_ROUNDS,
                record=spent,
            )
            phases.update(warmup_s=spent["warmup_s"], timed_s=spent["timed_s"])
            info["rounds"] = {"warmup": spent["warmup_rounds"], "timed": spent["timed_rounds"]}
        if watch.hits:
            info["recompile_limit_hits"] = watch.hits[:20]
            notes.append(
                f"dynamo hit its recompile limit {len(watch.hits)} time(s): those "
                "frames ran eagerly inside the compiled step"
            )
        info["host_load"] = host_load()
        info.update(
            timer=timer.kind,
            interleaved=list(setup.sides),
            budget_s_per_side=config.perf_budget_s,
            warmup_rounds=WARMUP_ROUNDS,
            noise_limits=dict(NOISE_LIMITS),
        )
        summaries = {name: Summary.of(s) for name, s in samples.items()}
        info["sides"] = {name: summary_dict(s) for name, s in summaries.items()}
        flagged = {name: why for name, s in summaries.items() if (why := noisy(s))}
        if flagged:
            info["noisy"] = flagged
        metrics = report.metrics
        for name, summary in summaries.items():
            metrics[f"perf_{name}_median_ms"] = summary.median_s * 1e3
        main = summaries.get(setup.mode_side)
        if main is None:
            notes.append(f"no {setup.mode_side} figure: that side did not run")
            return report
        metrics.update(
            perf_median_ms=main.median_s * 1e3,
            perf_p10_ms=main.p10_s * 1e3,
            perf_p90_ms=main.p90_s * 1e3,
            perf_cv=main.cv,
            perf_samples=main.n,
        )
        if "eager" in summaries and "compiled" in summaries:
            eager_ms, compiled_ms = (summaries[s].median_s * 1e3 for s in ("eager", "compiled"))
            metrics["perf_speedup"] = eager_ms / compiled_ms
            # The two medians the speedup was computed from, from this task's interleaved
            # rounds: a table shows them with it, never another task's eager median.
            info["speedup_from"] = {
                "eager_median_ms": eager_ms,
                "compiled_median_ms": compiled_ms,
                "measurement": "interleaved rounds of this compile task",
            }
            if flagged:
                info["speedup_noisy"] = "from a noisy side: " + "; ".join(
                    f"{side} ({', '.join(why)})" for side, why in flagged.items()
                )
        if setup.workload.tokens:
            metrics["perf_tokens_per_s"] = setup.workload.tokens / main.median_s
        if setup.workload.samples:
            metrics["perf_samples_per_s"] = setup.workload.samples / main.median_s
        _, phases["flops_s"] = timed(
            lambda: self._flops(subject, setup, main.median_s, metrics, info)
        )
        _, phases["memory_s"] = timed(lambda: self._memory(subject, setup, metrics, info))
        return report

    def _flops(self, subject, setup, median_s, metrics, info):
        config = subject.config
        peak, peak_source = flops_mod.peak_for(config, subject.adapter, config.dtype)
        info["peak_tflops"] = peak
        info["peak_source"] = peak_source
        if peak is None:
            info["notes"].append(peak_source)
        counted = None
        try:
            counted, counted_on = reference_flops(subject)
            info["flops_counted_on"] = counted_on
        except Exception as exc:  # no count: say why, never a zero
            info["notes"].append(f"FLOP count failed: {type(exc).__name__}: {str(exc)[:300]}")
        if counted:
            metrics["perf_flops_per_step"] = counted
            metrics["perf_achieved_tflops"] = flops_mod.achieved_tflops(counted, median_s)
            if peak:
                metrics["perf_mfu"] = flops_mod.mfu(counted, median_s, peak)
        elif counted == 0:
            info["notes"].append("the FLOP counter saw no matmul/conv/attention: no FLOP figures")
        if setup.workload.tokens:
            n_params, what = flops_mod.params_6nt(setup.model)
            estimate = flops_mod.flops_6nt(n_params, setup.workload.tokens, setup.workload.trains)
            info["params_6nt"] = {"n": n_params, "counts": what}
            metrics["perf_flops_6nt_per_step"] = estimate
            if peak:
                metrics["perf_mfu_6nt"] = flops_mod.mfu(estimate, median_s, peak)

    def _memory(self, subject, setup, metrics, info):
        adapter = subject.adapter
        adapter.reset_peak_memory()
        adapter.wait_for(setup.sides[setup.mode_side]())
        peak = adapter.peak_memory_bytes()
        if peak is None:
            reason = adapter.peak_memory_reason()
            info["peak_memory_unavailable"] = reason
            info["notes"].append(f"no peak memory: {reason}")
            return
        metrics["perf_peak_bytes"] = peak
        source = getattr(adapter, "peak_memory_source", lambda: None)()
        if source:
            info["peak_bytes_by"] = source
        if adapter.torch_type == "cpu":
            info["peak_bytes_is"] = "peak resident set of the worker process since it started"
        else:
            info["peak_bytes_is"] = "peak device memory allocated during one step"
