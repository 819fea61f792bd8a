"""The ladder of a ``kernels`` case: a replacement kernel evaluated inside the real model.

build      the replacement and the model with the ORIGINAL modules; the replaced copy is made
           from it (``swap_modules``), with every target swapped
op_call    the op called plainly on the device on its samples (custom ops only): an op that
           cannot run is ``eager_fail`` @op_call, not a wrong registration
opcheck    ``torch.library.opcheck`` on the op's samples (custom ops that run)
gradcheck  ``torch.autograd.gradcheck`` in float64 (custom ops that train)
samples    replacement module vs original module, OpInfo-like inputs, every claimed dtype
model      whole-model A/B: the replaced model (eager, or compiled in compile mode) against the
           same model with the ORIGINAL modules in eager, float64 where both allow it: outputs,
           loss and every gradient. The reference never runs the replacement, so a wrong
           backward cannot pass as it would against itself.
timing     the op alone (first replaced module, at the input the model gives it) and the whole
           training step, with and without, interleaved and synchronised (``timing.py``), in the
           mode of the task (eager, or torch.compile with the device's backend); in compile mode
           the graph breaks, graphs and recompiles the replacement adds

Status (the closed set): ``eager_fail`` @opcheck when the registration is wrong, ``accuracy_fail``
@gradcheck / @samples / @model when values or gradients differ, the usual statuses when the
replaced model cannot run or compile, else ``pass``. ``findings["kernel"]["verdict"]`` says it in
words (``correct_faster``, ``correct_slower``, ``correct_noisy_timing`` when the timing cannot tell
the sides apart, ``correct_same_speed`` when the gap is under ``MIN_SPEED_GAP`` or inside the
noise (``runner/kernels/speed_verdict.py``), ``opcheck_fail``, ...) with its reason; the
metrics ``kernel_step_speedup`` and ``kernel_op_speedup`` (original median / replacement median,
above 1 = faster) feed the fast_p summary (views/kernels.py). The replaced model's step time
is also recorded as ``perf_median_ms`` (p10, p90, samples) and the whole-model error as
``parity_max_rel_err``: the figures ``compare`` and ``gate`` judge, as for any case.
"""

from __future__ import annotations

import copy

from torchport.cases.base import Size
from torchport.execution import compile_backend
from torchport.execution.steps import make_step, place
from torchport.records.result import capture, error_note, error_value
from torchport.runner.kernels.op_stages import _exc, _first_line
from torchport.runner.kernels.speed_verdict import gap_unclear
from torchport.runner.kernels.timing import KernelTiming
from torchport.runner.stages import Stage, Stop
from torchport.timing import clock

# the allclose part of the whole-model A/B against the float64 truth, by the run's dtype (an
# original computing in float32 inside sets the floor at float64)
MODEL_ATOL = {"float64": 1e-4, "float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2}


def _check(name: str, *, when: str, then: str, before: str | None = None) -> Stage:
    """A check stage (``_<name>_stage``): it runs only when there is something to check, and
    its crash is recorded as the first failure (``_check_crashed``) without ending the climb."""
    return Stage(
        name,
        f"_{name}_stage",
        synchronise=False,
        when=when,
        before=before,
        required=False,
        failed="_check_crashed",
        then=then,
    )


class KernelLadder(KernelTiming):
    """Replacement kernels on the one stage runner (runner/stages.py)."""

    # -- the ladder -------------------------------------------------------------------------
    # Declared to the stage runner (runner/stages.py). The checks (opcheck, gradcheck,
    # samples) run only when there is something to check, and a check's failure does not end
    # the climb: the first failure decides the status (``_fail_once``), later stages still
    # record what they saw. The whole-model A/B and the timing record their own outcome.
    STAGES = (
        Stage("build", "_build_stage", synchronise=False, failed="_build_failed", then="_built"),
        _check("op_call", when="_has_custom_op", before="_float32_samples", then="_op_called"),
        _check("opcheck", when="_op_runs", before="_op_variants", then="_opchecked"),
        _check("gradcheck", when="_checks_gradients", then="_gradchecked"),
        _check("op_values", when="_op_checked", then="_op_valued"),
        Stage("place", "_place_stage", synchronise=False, then="_placed"),
        _check("samples", when="_has_module_input", then="_sampled"),
        # compiled once: its first call is the A/B's replaced side
        Stage(
            "compile",
            "_compile_stage",
            modes=("compile",),
            synchronise=False,
            failed="_compile_failed",
            then="_compiled",
        ),
        Stage("model", "_model_stage", captured=False),
        Stage("timing", "_timing_stage", captured=False, when="_correct"),
    )
    EXPLAINS = False  # the checks' failures are reported as they are

    def _build_stage(self):
        import torch

        self.dtype = getattr(torch, self.config.dtype)
        self.float64 = self.adapter.float64_support()
        self.kernel["device_float64"] = {"supported": self.float64[0], "detail": self.float64[1]}
        built = self._build(Size(batch=self.config.batch, seq=self.config.seq))
        # every claimed dtype asked of the device once: a check never runs one it refuses
        self.support = {d: self.adapter.dtype_support(d) for d in built[0].dtypes}
        refused = {d: why for d, (ok, why) in self.support.items() if not ok}
        if refused:
            self.kernel["device_refuses"] = refused
        return built

    def _build_failed(self, done) -> None:
        self.out.fail_from(done)
        self.kernel.update(verdict="error", reason=self.out.error["message"])  # type: ignore[index]

    def _built(self, value) -> None:
        rep, self.workload, swapped = value
        self.rep = rep
        self.kernel.update(
            {
                "replacement": rep.name,
                "target": rep.target,
                "replaced": swapped,
                "dtypes": list(rep.dtypes),
                "trains": rep.trains,
            }
        )
        if self.mode == "compile":
            self._choose_backend()

    def _has_custom_op(self) -> bool:
        return self.rep.op is not None and self.rep.op_samples is not None

    def _checks_gradients(self) -> bool:
        return "opcheck" in self.got and self.rep.trains  # opcheck ran (a crash ends the checks)

    def _op_checked(self) -> bool:
        return "opcheck" in self.got

    def _place_stage(self):
        # the replaced side is a second placement of the same host model, not a copy of the
        # device one: a device copy goes through the backend (torchax has no lowering for
        # the storage swap deepcopy makes), which would be a verdict torchport caused
        return tuple(
            place(self.workload, self.device, self.dtype, host_scope=self.adapter.host_scope)
            for _ in range(2)
        )

    def _placed(self, value) -> None:
        from torchport.cases.kernels import swap_modules

        original, replaced = self.placed = value
        swap_modules(replaced.model, self.rep)
        self.module_input = self._module_input(original, self.rep)
        self.steps = {
            "original": make_step(original.model, original.model, original),
            "replacement": make_step(replaced.model, replaced.model, replaced),
        }
        self.first_out: dict | None = None  # the compiled replaced side's first step

    def _has_module_input(self) -> bool:
        return self.module_input is not None

    def _compile_stage(self):
        return self._compiled_sides(*self.placed)

    def _compile_failed(self, done) -> None:
        self._fail_once(done.status, "compile", error_value(_exc(done)), "error")

    def _compiled(self, value) -> None:
        self.steps, self.first_out = value
        if self.first_out is None:  # a side failed to compile (recorded)
            raise Stop

    def _model_stage(self) -> None:
        self._model_ab(self.rep, self.workload, self.first_out)

    def _correct(self) -> bool:
        return self.out.status == "pass"

    def _timing_stage(self) -> None:
        self._timing(self.rep, self.steps, self.module_input)

    def end(self) -> None:
        if not self._correct():  # a wrong kernel's speed decides nothing
            self.kernel["timing"] = "not timed: the replacement is not correct"

    def _build(self, size: Size):
        from torchport.cases.kernels import swap_modules

        rep = self.case.replacement()
        workload = self.case.build(seed=self.config.seed, size=size)
        with self.adapter.host_scope():  # host work, out of a backend's global modes
            probe = copy.deepcopy(workload.model)
        swapped = swap_modules(probe, rep)
        if not swapped:
            raise LookupError(
                f"replacement '{rep.name}' targets '{rep.target}', but the model has no module "
                "of that class; name the class as type(module).__name__ or its full path"
            )
        return rep, workload, swapped

    def _choose_backend(self) -> None:
        try:
            self.backend = compile_backend.choose(
                self.adapter, self.config.compile_backend, self.config.compile_mode
            )
        except compile_backend.NoCompileBackend as exc:
            self.kernel.update(verdict="error", reason=str(exc))
            self.stop("compile_fail", "compile", error_note("NoCompileBackend", str(exc)))
        self.out.findings["compile_backend"] = self.backend.to_dict()

    # -- whole model --------------------------------------------------------------------------
    def _model_ab(self, rep, workload, got: dict | None) -> None:
        """The replaced model and the model with the ORIGINAL modules, both at the run's dtype
        on the device, each judged against the original model in float64 on the CPU (the
        reference child's, rule 8): the replaced side fails only where it is further from
        that truth than the original by more than the dtype's noise (instruments/parity.py).
        ``got``: the compiled replaced model's first step (compile mode); None: the replaced
        model in eager."""
        from torchport.cases.kernels import swap_modules
        from torchport.execution import reference as reference_mod
        from torchport.instruments import parity

        start = clock()
        size = Size(batch=self.config.batch, seq=self.config.seq)
        sides: dict = {}
        for name in ("original", "replacement"):
            if name == "replacement" and got is not None:
                sides[name] = got
                continue
            placed = place(workload, self.device, self.dtype, host_scope=self.adapter.host_scope)
            if name == "replacement":
                swap_modules(placed.model, rep)
            done = capture("run", make_step(placed.model, placed.model, placed), clock)
            if not done.ok:
                self.kernel["model"] = {"error": f"{name}: {_first_line(done.exc)}"}
                self._fail_once(done.status, "model", error_value(_exc(done)), "error")
                return
            self.adapter.wait_for(done.value)
            sides[name] = done.value
        try:
            local = None if reference_mod.rebuildable(self.case, self.config) else self.case
            with self.adapter.host_scope():
                truth = reference_mod.obtain(
                    reference_mod.spec_for(self.case, self.config, size),
                    local,
                    timeout_s=max(self.config.timeout_s - (clock() - start), 60.0),
                )
        except Exception as exc:  # no truth: no verdict on the model, said
            self.kernel["model"] = {"error": f"no float64 reference: {_first_line(exc)}"}
            self._fail_once(
                "build_fail", "reference", error_note("ReferenceFailed", _first_line(exc)), "error"
            )
            return
        self.out.durations["model_s"] = clock() - start
        with self.adapter.host_scope():
            report = parity.compare(
                {k: v.detach().to("cpu") for k, v in sides["replacement"].items()},
                truth["reference"],
                {k: v.detach().to("cpu") for k, v in sides["original"].items()},
                atol=MODEL_ATOL[self.config.dtype],
                rtol=MODEL_ATOL[self.config.dtype],
                low_precision=self.config.dtype in ("float16", "bfloat16"),
                dtype=self.config.dtype if self.config.dtype in parity.CEILING else "float32",
            )
            original = parity.compare(
                {k: v.detach().to("cpu") for k, v in sides["original"].items()},
                truth["reference"],
                truth["baseline"],
                atol=MODEL_ATOL[self.config.dtype],
                rtol=MODEL_ATOL[self.config.dtype],
                low_precision=self.config.dtype in ("float16", "bfloat16"),
                dtype=self.config.dtype if self.config.dtype in parity.CEILING else "float32",
            )
        found = report.findings()
        figures = report.metrics()
        model = {
            "dtype": self.config.dtype,
            "truth": f"the ORIGINAL model on the CPU in {truth['kind']}"
            + (
                f" (float64 failed: {truth.get('float64_error')})"
                if truth["kind"] != "float64"
                else ""
            ),
            "rule": "replaced vs the truth, allowed k x the original's error at the same dtype "
            "+ atol/10 under the dtype's ceiling (instruments/parity.py)",
            "compared": found["tensors"],
            "gradients": sum(1 for t in report.tensors if t.name.startswith("grad.")),
            "failed": found["failing"],
            "failures": found["worst"],
            "missing": found["missing"],
            "max_rel_err": figures.get("parity_max_rel_err", 0.0),
            "original_max_rel_err": original.metrics().get("parity_max_rel_err", 0.0),
        }
        self.kernel["model"] = model
        self.out.metrics["kernel_model_max_rel_err"] = model["max_rel_err"]
        self.out.metrics["parity_max_rel_err"] = model["max_rel_err"]  # compare's parity drift
        if model["failed"]:
            self._fail_once(
                "accuracy_fail",
                "model",
                error_note(
                    "ParityMismatch",
                    f"whole model ({self.config.dtype}) against the float64 truth, the "
                    f"original's error allowed: {report.message()}",
                ),
                "model_mismatch",
            )

    def _checks_ran(self) -> str:
        """The checks that ran, as a reason says them: which gradcheck, on which device, or
        what stood in for it."""
        k, parts = self.kernel, []
        if isinstance(k.get("opcheck"), dict):
            parts.append(f"opcheck on {k['opcheck']['checked']} calls")
        grad = k.get("gradcheck")
        if isinstance(grad, dict):
            cpu, dev = grad.get("cpu", {}), grad.get("device", {})
            if "checked" in cpu:
                text = f"gradcheck float64 on cpu ({cpu['checked']} variants)"
                if "checked" in dev:
                    text += f" and on {self.device} ({dev['checked']})"
                elif "float64 truth" in dev.get("check", ""):
                    text += (
                        f"; on {self.device} its gradients at its dtypes against the float64 truth"
                    )
                parts.append(text)
            else:
                parts.append("no gradcheck (float64 not claimed)")
        if isinstance(k.get("op_values"), dict):
            parts.append(f"op values on {k['op_values']['checked']} variants against float64")
        if isinstance(k.get("samples"), dict):
            parts.append(f"{k['samples']['checked']} module samples against float64")
        parts.append("whole model against float64")
        return ", ".join(parts)

    def finish(self) -> dict:
        k, m = self.kernel, self.out.metrics
        if self.out.status == "pass":
            speed = m.get("kernel_step_speedup")
            if speed is None:
                k.update(verdict="correct_untimed", reason="correct; the step was not timed")
            else:
                noise = self._step_noise()
                unclear = "" if noise else gap_unclear(self.kernel.get("timing"), speed)
                k["verdict"] = (
                    "correct_noisy_timing"
                    if noise
                    else "correct_same_speed"
                    if unclear
                    else "correct_faster"
                    if speed > 1.0
                    else "correct_slower"
                )
                k["reason"] = (
                    f"correct ({self._checks_ran()}); training step {speed:.3g}x the "
                    "original's speed "
                    f"({m['step_ms_original']:.3g} ms -> {m['step_ms_replacement']:.3g} ms, "
                    f"{self.mode})"
                    + (f"; timing noisy: {noise}" if noise else "")
                    + (f"; no speed verdict: {unclear}" if unclear else "")
                )
        self.out.findings["kernel"] = k
        return self.out.to_dict()
