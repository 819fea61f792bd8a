"""The stage ladder for one (case, mode), run inside a worker process.

build -> place -> run -> compile -> compiled_run -> parity, then the requested probes, each in
its own pass. The status is the first stage that failed; every stage's duration is recorded.

The steps whose numbers parity compares are ``Compared`` steps (steps.py): training steps in
training mode, starting from the placed state, dropout masks drawn the same way on every side
(the reference child does the same), running statistics returned with the outputs. The probes
get plain steps of the same model, with the device's own random kernels.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from typing import NoReturn

from torchport.cases.base import Case, Size
from torchport.config import COLD_WORKER_ENV, LOW_PRECISION, RunConfig
from torchport.execution import compile_backend
from torchport.execution import reference as reference_mod
from torchport.execution.build import build_workload, step_info
from torchport.execution.steps import Compared, first_compiled_step, make_step, place, to_cpu
from torchport.instruments import (
    compile_metrics,
    compile_outcome,
    custom_grad,
    determinism,
    parity,
    parity_weak,
)
from torchport.probes.base import Subject
from torchport.records.result import (
    capture,
    error_note,
    error_value,
    skipped,
)
from torchport.runner.stages import Stage, StageRunner, Stop
from torchport.timing import clock


class Ladder(StageRunner):
    """The model ladder: build, place, run, compile, compiled_run, reference, parity, probes."""

    def __init__(
        self,
        case: Case,
        mode: str,
        config: RunConfig,
        adapter,
        emit: Callable,
        reference_cache: dict,
    ):
        super().__init__(case, mode, config, adapter, emit, reference_cache)
        self.graph_draws: set[str] = set()  # random ops a compiled graph draws itself
        self.case_deadline = clock() + config.timeout_s
        self.out.findings["tags"] = list(case.tags)
        # the compile backend chosen (compile mode), with why
        self.backend: compile_backend.Choice | None = None

    # The stages, in records/status.py's order; each method below runs one, or decides on
    # what it gave (``then``). What a stage leaves for the later ones is kept on the ladder.
    STAGES = (
        Stage("build", "_build_stage", then="_built"),
        Stage("place", "_place_stage", then="_placed"),
        Stage("run", "_run_stage", then="_ran"),
        Stage(
            "compile",
            "_compile_stage",
            modes=("compile",),
            before="_before_compile",
            then="_compiled",
        ),
        Stage("compiled_run", "_compiled_run_stage", modes=("compile",), then="_compiled_ran"),
        # The reference runs after the device so that a fault in the model shows at the
        # device stage that met it; it is computed once per case and shared by the modes.
        Stage("reference", "_reference_stage"),
        Stage("parity", "_parity_stage", required=False, then="_judged"),
    )

    def begin(self) -> None:
        import torch

        reason = self.case.skip_reason_for(mode=self.mode, device=self.adapter.device())
        if reason:
            self._skip(reason)
        self.dtype = getattr(torch, self.config.dtype)
        self.size = Size(batch=self.config.batch, seq=self.config.seq)

    def _build_stage(self):
        return self._build(self.size)

    def _built(self, workload) -> None:
        self.workload = workload
        self.out.findings["workload"] = workload.meta
        self.out.findings["step"] = step_info(workload)

    def _place_stage(self):
        return place(
            self.workload, self.adapter.device(), self.dtype, host_scope=self.adapter.host_scope
        )

    def _placed(self, placed) -> None:
        self.placed = placed
        if placed.meta.get("placement_ties"):
            self.out.findings["placement_ties"] = placed.meta["placement_ties"]
        self._numerics()
        if self.config.strict:
            self.out.findings["strict"] = self.adapter.strict_note()
        module = self.module = placed.model
        self.eager_step = make_step(module, module, placed)
        self.compared = Compared(self.config.seed)
        self.graph_draws = self.compared.traced_draws  # filled as a compiled step is traced
        self.compared_eager = make_step(module, module, placed, compared=self.compared)
        self.judged_step = self.compared_eager  # what parity judges (compiled in compile)

    def _run_stage(self) -> dict:
        with custom_grad.recording() as self.custom_functions:
            return self._outputs(self.compared_eager)

    def _ran(self, result: dict) -> None:
        self.result = result
        self.noise = self._determinism(self.compared_eager, result)
        self.runner, self.step = self.module, self.eager_step
        self.cold_compile: dict | None = None

    def _before_compile(self) -> None:
        self._choose_backend()
        self.cold = COLD_WORKER_ENV in os.environ  # a fresh process with empty compile caches
        if self.cold:
            compile_metrics.start_recording()

    def _compile_stage(self):
        return self._first_compiled(self.module, self.placed, self.compared)

    def _compiled(self, value) -> None:
        self.runner, self.judged_step, outcome = value
        self.step = make_step(self.runner, self.module, self.placed)
        self.out.findings["compile_outcome"] = outcome.to_dict()
        if outcome.compiled is False:  # rule 9: "compiled" means a graph reached it
            reason = outcome.reason()
            self.out.findings["compile_outcome"]["verdict"] = reason
            self.stop_at("compile", error_note("NotCompiled", reason))

    def _compiled_run_stage(self) -> dict:
        return self._outputs(self.judged_step)

    def _compiled_ran(self, result: dict) -> None:
        self.result = result
        # Masked dropout calls and comparable draws are graph breaks the user's program does
        # not have: then the compile probe measures the cold compile in a child of its own.
        if self.cold and not (self.compared.masked_calls or self.compared.drawn_calls):
            d = self.out.durations
            self.cold_compile = compile_metrics.first_step_record(
                self.adapter, d["compile_s"], d["compiled_run_s"], d["run_s"]
            )

    def _reference_stage(self) -> dict:
        return self._reference(self.size)

    def _parity_stage(self):
        tolerance = self.workload.tolerance
        return self._parity(self.result, self.got["reference"], self.noise, tolerance)

    def _judged(self, report) -> None:
        workload, compared = self.workload, self.compared
        if not report.ok and self._uncontrolled():
            report = self._judge_random_off(
                self.judged_step, compared, self.size, self.noise, workload, report
            )
        if report.ok and workload.trains:
            self._record_library_ops(self.compared_eager, self.custom_functions)
        if report.ok and workload.trains and self.custom_functions.calls:
            self._custom_backward(self.custom_functions)
        if not report.ok:
            note = report.message().replace(
                "outside tolerance",
                "outside tolerance" + self._weak_note(self.got["reference"]),
                1,
            )
            self.out.fail_at("parity", error_note("ParityMismatch", note))

    def end(self) -> None:
        module = self.module
        subject = self._subject(
            workload=self.placed,
            model=module,
            runner=self.runner,
            step=self.step,
            make_runner=lambda: self._compile(module) if self.mode == "compile" else module,
            cold_compile=self.cold_compile,
        )
        self._probes(subject)

    def _uncontrolled(self) -> list[str]:
        """Random ops the compared step draws that torchport does not make comparable."""
        found = set(
            (self.out.findings["step"].get("randomness") or {}).get("uncontrolled_random_ops") or ()
        )
        return sorted(found | {f"{op} (in the compiled graph)" for op in self.graph_draws})

    def _judge_random_off(self, judged_step, compared, size, noise, workload, failed):
        """A parity failure of a step that draws random numbers torchport does not control is
        no verdict: the step is run again, on the device and in the reference, with that
        randomness switched off (every module in eval mode; what still draws, such as a
        ``torch.randn`` that ignores ``training``, drawn on the CPU from (seed, op, call index) on
        both sides), and judged on that; recorded in findings["randomness_off"] and said in the
        parity note. Where it cannot be switched off (the reference still draws an op that is
        not handled, or the rerun fails), the failure stands, with its note."""
        uncontrolled = self._uncontrolled()
        record = self.out.findings["randomness_off"] = {
            "uncontrolled": uncontrolled,
            "how": reference_mod.RANDOM_OFF,
            "with_randomness": failed.message(),
        }
        compared.random_off = True
        try:
            rerun = capture("parity", lambda: self._outputs(judged_step), clock)
        finally:
            compared.random_off = False
        spec = dataclasses.replace(self._reference_spec(size), random_off=True)
        local = None if reference_mod.rebuildable(self.case, self.config) else self.case
        try:
            with self.adapter.host_scope():
                reference = reference_mod.obtain(
                    spec, local, timeout_s=max(self.case_deadline - clock(), 30.0)
                )
        except Exception as exc:
            reference = {"error": f"{type(exc).__name__}: {exc}"}
        still = sorted(((reference.get("randomness") or {}).get("uncontrolled_random_ops")) or ())
        # The draws each side made on the CPU must be the same calls: a draw a compiler lowered
        # into its own graph (never through the dispatcher) kept the device's generator.
        theirs = dict((reference.get("randomness") or {}).get("drawn_on_cpu") or {})
        if (
            rerun.ok
            and "error" not in reference
            and not still
            and theirs != dict(compared.drawn_on_cpu)
        ):
            still = [
                f"draws on the CPU differ: device {dict(compared.drawn_on_cpu)}, reference "
                f"{theirs} (a draw inside the compiled graph kept the device's generator)"
            ]
        if not rerun.ok or "error" in reference or still:
            record["judged"] = False
            record["why_not"] = (
                f"the step failed with randomness off: {type(rerun.exc).__name__}: {rerun.exc}"
                if not rerun.ok
                else reference.get("error")
                or "it still draws with every module in eval mode: " + ", ".join(still)
            )
            return failed
        previous_note = self.out.findings["parity"].get("note")
        report = self._parity(rerun.value, reference, noise, workload.tolerance, note=False)
        record["judged"] = True
        record["ok"] = report.ok
        if compared.drawn_on_cpu:  # what eval mode left drawing, drawn on the CPU on each side
            record["drawn_on_cpu"] = dict(compared.drawn_on_cpu)
        self.out.findings["parity"]["note"] = (
            f"judged with randomness switched off ({reference_mod.RANDOM_OFF}): "
            + (previous_note or "the step draws random numbers torchport does not control")
            + f"; with that randomness: {failed.message()}"
        )
        return report

    def _record_library_ops(self, eager_step, seen) -> None:
        """Custom ops the step calls as ``torch.ops.ns.name(...)``, which the run stage's
        recorder does not see: noted by a dispatch mode in one more eager step of their own (a
        dispatch mode never runs in the pass that decides parity), only when the run stage's
        record says the step reached an op outside torch's namespaces with an Autograd kernel
        (or cannot say: ``custom_grad.dispatch_pass_needed``). A pass that fails is said in the
        notes, never the case's failure."""
        if not custom_grad.dispatch_pass_needed(seen):
            return
        before = set(seen.calls)

        def observed():
            with custom_grad.dispatch_recording(seen):
                return self._outputs(eager_step)

        done = capture("custom_ops", observed, clock)
        self.out.durations["custom_ops_pass_s"] = done.duration_s
        if not done.ok:
            self.out.findings.setdefault("notes", []).append(
                "custom ops called through the dispatcher not recorded: "
                f"{type(done.exc).__name__}: {str(done.exc)[:300]}"
            )
        elif set(seen.calls) - before:
            self.out.findings["custom_ops_seen_by_dispatcher"] = sorted(set(seen.calls) - before)

    def _custom_backward(self, seen) -> None:
        """A custom autograd Function's or custom op's backward against its forward (gradcheck
        on the CPU): the reference runs the same backward, so parity alone cannot see a wrong
        one."""
        checked = custom_grad.check(seen)
        self.out.findings["custom_backward"] = checked
        if seen.unrecorded:
            self.out.findings.setdefault("notes", []).append(seen.unrecorded)
        wrong = [c for c in checked if c["ok"] is False]
        if wrong:
            self.out.fail_at(
                "parity",
                error_note(
                    "CustomBackwardMismatch",
                    "; ".join(
                        f"{c.get('kind', custom_grad.FUNCTION)} {c['function']}: {c['detail']}"
                        for c in wrong
                    ),
                ),
            )

    def _parity_basis(self) -> str:
        """On the CPU, the eager run at the run's dtype is the baseline itself: judged by the
        dtype's ceiling against float64, never passed against its own noise."""
        return (
            "baseline" if (self.adapter.torch_type == "cpu" and self.mode == "eager") else "device"
        )

    def _skip(self, reason: str) -> NoReturn:
        self.skip(
            skipped(
                self.case.id,
                self.mode,
                case_version=self.case.version,
                reason=reason,
                tags=tuple(self.case.tags),
            )
        )

    def _subject(self, **parts) -> Subject:
        """What the probes see: this (case, mode) on its device, with ``parts`` (the placed
        workload, model, runner, step...)."""
        import torch

        return Subject(
            case=self.case,
            mode=self.mode,
            config=self.config,
            adapter=self.adapter,
            device=self.adapter.device(),
            dtype=getattr(torch, self.config.dtype),
            emit=self.emit,
            case_deadline=self.case_deadline,
            **parts,
        )

    def _record_reference(self, value: dict) -> dict:
        """findings["reference"]: which reference a result was judged against, and where it
        came from."""
        kind = value["kind"]
        found = self.out.findings["reference"] = {
            "kind": kind,
            "label": kind
            if kind == "float64"
            else f"float32 (float64 failed: {value.get('float64_error')})",
            "cache": value.get("cache"),
            "process": value.get("process"),
        }
        return found

    def _key(self, size: Size) -> tuple:
        return (self.case.id, self.config.seed, size, self.config.dtype)

    def _build(self, size: Size):
        key = self._key(size)
        cached = self.reference_cache.get(key)
        if cached is None:
            self.reference_cache.clear()  # keep one case's tensors alive at a time
            with self.adapter.host_scope():  # a CPU build, untouched by backend modes
                workload = build_workload(self.case, seed=self.config.seed, size=size)
            cached = self.reference_cache[key] = {"workload": workload}
        return cached["workload"]

    def _outputs(self, step) -> dict:
        """One step, one wait on the device, then its outputs on the host (copied after the
        wait: a lazy backend would otherwise run, or compile, once per output tensor)."""
        value = step()
        self.adapter.wait_for(value)
        return to_cpu(value)

    def _determinism(self, eager_step, first: dict) -> dict:
        """A second eager run compared with the first; per-tensor noise. Stop when the second
        run failed (the result then says so)."""
        import torch

        torch.manual_seed(self.config.seed)
        again = capture("run", lambda: self._outputs(eager_step), clock)
        self.out.durations["determinism_run_s"] = again.duration_s
        if not again.ok:
            self.out.fail_from(again)
            self._explain(again)
            raise Stop
        with self.adapter.host_scope():
            found = determinism.compare_runs(first, again.value, self.config.dtype)
        self.out.findings["determinism"] = found["summary"]
        self.out.metrics["determinism_max_rel_diff"] = found["summary"]["max_rel_diff"]
        if found["summary"].get("finding"):
            self.out.findings.setdefault("notes", []).append(found["summary"]["finding"])
        return found["noise_rmse"]

    def _first_compiled(self, module, placed, compared):
        with compile_outcome.watch() as outcome:
            runner, step = first_compiled_step(self._compile, module, placed, compared=compared)
        return runner, step, outcome

    def _numerics(self) -> None:
        self.out.findings["sync_method"] = self.adapter.sync_method
        try:
            self.out.findings["numerics"] = self.adapter.numerics()
        except Exception as exc:  # a backend that cannot say: recorded, not fatal
            self.out.findings["numerics"] = {"unavailable": f"{type(exc).__name__}: {exc}"}

    def _later_references(self) -> tuple:
        """Values of this case the perf probe will ask the reference child for (its FLOP
        count): computed by the parity reference's child while it has torch imported."""
        if "perf" not in self.config.probes:
            return ()
        from torchport.probes.perf import flops_spec

        return (flops_spec(self.case, self.config),)

    def _reference_spec(self, size: Size) -> reference_mod.ReferenceSpec:
        return reference_mod.spec_for(self.case, self.config, size)

    def _reference(self, size: Size) -> dict:
        """The CPU reference and baseline, from the clean child's disk cache (rule 8)."""
        cached = self.reference_cache[self._key(size)]
        if "reference" not in cached:
            local = None if reference_mod.rebuildable(self.case, self.config) else self.case
            with self.adapter.host_scope():
                cached["reference"] = reference_mod.obtain(
                    self._reference_spec(size),
                    local,
                    timeout_s=max(self.case_deadline - clock(), 30.0),
                    also=self._later_references(),
                )
        value = cached["reference"]
        self._record_reference(value)["rule"] = (
            "float64 with CPU-baseline allowance under the dtype's ceiling"
            if value["kind"] == "float64"
            else parity_weak.RULE
        )
        if value.get("randomness"):
            randomness = dict(value["randomness"])
            if randomness.get("uncontrolled_random_ops") and self.adapter.torch_type != "cpu":
                from torchport.execution.randomness import device_generator

                randomness["device_generator"] = device_generator(self.adapter.device())
            self.out.findings["step"]["randomness"] = randomness
        return value

    def _choose_backend(self) -> None:
        """The compile backend for this device, recorded with why; Stop (compile_fail) when
        none can compile for it."""
        try:
            self.backend = compile_backend.choose(
                self.adapter, self.config.compile_backend, self.config.compile_mode
            )
        except compile_backend.NoCompileBackend as exc:
            self.emit({"event": "stage", "stage": "compile"})
            self.stop_at("compile", error_note("NoCompileBackend", str(exc)))
        self.out.findings["compile_backend"] = self.backend.to_dict()
        if self.backend.name == "inductor":
            # loaded here, outside the timed compile, so that compared steps can set its
            # fallback_random (execution/randomness.py) without paying for the import
            with contextlib.suppress(Exception):
                import torch._inductor.config  # noqa: F401

    def _compile(self, module):
        assert self.backend is not None, "the backend is chosen before compiling"
        return self.backend.compile(module)

    def _parity(self, result, reference: dict, noise: dict, tolerance, *, note: bool = True):
        atol, rtol = (tolerance.atol, tolerance.rtol) if tolerance else self.config.tolerance
        basis = self._parity_basis()
        with self.adapter.host_scope():
            if reference["kind"] == "float64":
                report = parity.compare(
                    result,
                    reference["reference"],
                    reference["baseline"],
                    atol=atol,
                    rtol=rtol,
                    noise=noise,
                    low_precision=self.config.dtype in LOW_PRECISION,
                    dtype=self.config.dtype,
                    basis=basis,
                )
            else:
                report = parity_weak.compare(result, reference["reference"], atol=atol, rtol=rtol)
        self.out.probe_versions["parity"] = parity.PROBE_VERSION
        self.out.metrics.update({k: v for k, v in report.metrics().items() if v is not None})
        self.out.findings["parity_failures"] = report.failures()[:50]
        self.out.findings["parity"] = report.findings()
        uncontrolled = self._uncontrolled()
        if note and uncontrolled and not report.ok:
            self.out.findings["parity"]["note"] = (
                "the step draws random numbers torchport does not control ("
                + ", ".join(uncontrolled)
                + "): a device's generator differs from the "
                "CPU's, which alone can fail parity"
            )
        return report

    @staticmethod
    def _weak_note(reference: dict) -> str:
        return (
            ""
            if reference["kind"] == "float64"
            else f" of the float32 reference (float64 failed: {reference.get('float64_error')})"
        )

    def _probes(self, subject: Subject) -> None:
        for name, probe in run_order(self.config.probes):
            if self.config.scenario not in probe.scenarios or not probe.applies(subject):
                continue
            self.emit({"event": "stage", "stage": f"probe:{name}"})
            start = clock()
            report = probe.safe_run(subject)
            self.out.durations[f"probe_{name}_s"] = clock() - start
            self.out.probe_versions[name] = probe.version
            try:
                report.check()
            except ValueError as exc:  # a malformed report is that probe's crash, not ours
                self.out.findings.setdefault("probe_errors", []).append(
                    {**error_value(exc), "probe": name, "status": "crash"}
                )
                continue
            self.out.metrics.update(report.metrics)
            self.out.findings.update(report.findings)
            self.out.artifacts.extend(report.artifacts)
            if report.grade:
                self.out.grade = report.grade
            if report.error:
                self.out.findings.setdefault("probe_errors", []).append(report.error)
            if report.status and self.out.status == "pass":
                self.out.status, self.out.stage = report.status, report.stage
                self.out.error = report.error


def run_order(names) -> list[tuple]:
    """(name, probe) in the order they run: the requested order, except that probes that
    observe with instruments (recorders, the profiler) run last, so a backend one disturbs
    does not fail the timing or compile probes after it (docs/design.md rule 10)."""
    from torchport.probes.registry import load_probe

    probes = [(name, load_probe(name)) for name in names]
    return sorted(probes, key=lambda item: item[1].observes)
