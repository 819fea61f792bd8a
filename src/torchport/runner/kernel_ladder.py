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
the sides apart, ``opcheck_fail``, ...) with its reason; the
metrics ``kernel_step_speedup`` and ``kernel_op_speedup`` (original median / replacement median,
above 1 = faster) feed the fast_p summary (views/kernels.py). The replaced model's step time
is also recorded as ``perf_median_ms`` (p10, p90, samples) and the whole-model error as
``parity_max_rel_err``: the figures ``compare`` and ``gate`` judge, as for any case.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from torchport.cases.base import Size
from torchport.config import RunConfig
from torchport.execution import compile_backend
from torchport.execution.steps import make_step, place
from torchport.instruments import compile_metrics
from torchport.probes.perf import host_load, noisy, summary_dict
from torchport.records.result import capture, error_note, error_value, skipped
from torchport.runner import kernel_checks
from torchport.runner.stages import Stage, StageRunner, Stop
from torchport.timing import Summary, clock, sample_blocked, sample_interleaved, step_timer

# the allclose part of the whole-model A/B against the float64 truth, by the run's dtype (an
# original computing in float32 inside sets the floor at float64)
MODEL_ATOL = {"float64": 1e-4, "float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2}
# timed rounds at least (each round: both sides once): the per-round ratios decide a noisy step
MIN_ROUNDS = 20


def _first_line(exc: BaseException | None) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:400] if text else ''}"


def _exc(captured) -> BaseException:
    assert captured.exc is not None  # only called on a failed capture
    return captured.exc


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


class KernelLadder(StageRunner):
    """Replacement kernels on the one stage runner (runner/stages.py)."""

    def __init__(
        self, case, mode: str, config: RunConfig, adapter, emit: Callable, reference_cache: dict
    ):
        super().__init__(case, mode, config, adapter, emit, reference_cache)
        self.out.findings.update({"tags": list(case.tags), "ladder": "kernel"})
        self.kernel: dict = {}
        self.out.findings["kernel"] = self.kernel
        self.backend: compile_backend.Choice | None = None
        self.device = adapter.device()
        self.float64: tuple[bool, str] = (True, "not asked")

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

    def _fail_once(self, status: str, stage: str, error: dict, verdict: str) -> None:
        """The first failure decides the status; later stages still record what they saw."""
        if self.out.status == "pass":
            self.out.fail(status, stage, error)
            self.kernel["verdict"] = verdict
            self.kernel["reason"] = error["message"]

    def _check_crashed(self, done) -> None:
        """A check that raised (not one that found a fault): the first failure, as a crash."""
        self._fail_once("crash", done.stage, error_value(_exc(done)), "error")

    def _build_stage(self):
        import torch

        self.dtype = getattr(torch, self.config.dtype)
        self.float64 = self.adapter.float64_support()
        self.kernel["device_float64"] = {"supported": self.float64[0], "detail": self.float64[1]}
        if self.config.dtype == "float64" and not self.float64[0]:
            why = f"the run's dtype is float64 and {self.device} has none: {self.float64[1]}"
            self.kernel.update(verdict="skip", reason=why)
            self.skip(
                skipped(
                    self.case.id,
                    self.mode,
                    case_version=self.case.version,
                    reason=why,
                    tags=tuple(self.case.tags),
                )
            )
        return self._build(Size(batch=self.config.batch, seq=self.config.seq))

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

    def _float32_samples(self) -> None:
        import torch

        self.op_samples = self.rep.op_samples(torch.float32, self.device)

    def _op_call_stage(self):
        # the op called plainly first: opcheck's own instruments (SchemaCheckMode's aliasing
        # checks) need ops a backend may lack, so an op that cannot run on the device at all
        # would read as a wrong registration; it is a failure to run, named as such
        return kernel_checks.runs(self.rep.op, self.op_samples)

    def _op_called(self, value) -> None:
        ran, first_exc = value
        if ran["failed"]:
            first = ran["failures"][0]
            self.kernel["op_call"] = ran
            self.kernel["opcheck"] = self.kernel["gradcheck"] = "not run: the op does not run"
            explained = first_exc is not None and self.adapter.explain_failure("eager", first_exc)
            self._fail_once(
                "eager_fail",
                "op_call",
                error_note(
                    type(first_exc).__name__,
                    f"the op does not run on {self.device} (sample {first['sample']}): "
                    f"{first['message']}" + (f"; {explained}" if explained else ""),
                ),
                "does_not_run",
            )

    def _op_runs(self) -> bool:
        """The op ran on the device (opcheck checks a registration of an op that runs)."""
        return "op_call" in self.got and not self.got["op_call"][0]["failed"]

    def _op_variants(self) -> None:
        """Variants of the user's own samples (runner/kernel_variants.py), from float64 CPU
        copies: each check makes them at its dtype on its device."""
        import torch

        from torchport.runner import kernel_variants

        samples = self.rep.op_samples(torch.float64, "cpu")
        self.op_variants = [
            v
            for index, (args, kwargs) in enumerate(samples)
            for v in kernel_variants.variants(args, kwargs, index)
        ]

    def _opcheck_stage(self) -> dict:
        """opcheck on the device on every variant in float32, and on the samples as given at
        every other dtype the replacement claims and the device computes."""
        import torch

        calls, skipped = [], []
        for dtype_name in self.rep.dtypes:
            if dtype_name == "float64" and not self.float64[0]:
                skipped.append(f"float64: {self.float64[1]}")
                continue
            dtype = getattr(torch, dtype_name)
            for var in self.op_variants:
                if dtype_name != "float32" and var.name != "as_given":
                    continue
                calls.append(
                    (f"{dtype_name} {var.label}", var.call_args(var.leaves(dtype, self.device)))
                )
        report = kernel_checks.opcheck(self.rep.op, [c for _, c in calls])
        for failure in report["failures"]:
            failure["sample"] = calls[failure["sample"]][0]
        report["skipped"] = skipped
        return report

    def _opchecked(self, report: dict) -> None:
        self.kernel["opcheck"] = report
        self.out.metrics["kernel_opcheck_failed"] = report["failed"]
        if report["failed"]:
            first = report["failures"][0]
            self._fail_once(
                "eager_fail",
                "opcheck",
                error_note(
                    "OpCheckError",
                    f"opcheck {first['test']} failed on sample "
                    f"{first['sample']}: {first['message']}",
                ),
                "opcheck_fail",
            )

    def _gradcheck_stage(self) -> dict:
        """gradcheck in float64 on the CPU (the op's CPU implementation) over every variant;
        on the device too where it computes float64; else the device's gradients are judged
        at its dtypes against the float64 truth (``op_values``), and the report says so."""
        from torchport.runner import kernel_truth

        if "float64" not in self.rep.dtypes:  # its float64 is no claim of its own to hold
            why = (
                f"gradcheck not run: the replacement claims {', '.join(self.rep.dtypes)}, not "
                "float64; its gradients are judged at those dtypes against the original's "
                "float64 truth (samples, whole model)"
            )
            return {"cpu": {"check": why}, "device": {"check": why}, "failed": 0}
        report: dict = {"cpu": kernel_truth.gradcheck(self.rep.op, self.op_variants, "cpu")}
        if self.device.startswith("cpu"):
            report["device"] = {"check": "the CPU gradcheck (the device is the CPU)"}
        elif self.float64[0]:
            ran = kernel_truth.gradcheck(self.rep.op, self.op_variants, self.device)
            if ran["checked"]:
                report["device"] = {"check": f"gradcheck float64 on {self.device}", **ran}
            else:  # float64 computes, but not this op: its refusal said, the truth instead
                why = ran["skipped"][0] if ran["skipped"] else "no variant ran"
                report["device"] = {
                    "check": f"gradients at {self._device_dtypes()} against the float64 truth "
                    f"(op_values): gradcheck float64 could not run on {self.device}: {why}",
                    "skipped": ran["skipped"],
                }
        else:
            report["device"] = {
                "check": f"gradients at {self._device_dtypes()} against the float64 truth "
                f"(op_values): no float64 on {self.device}: {self.float64[1]}"
            }
        report["failed"] = report["cpu"]["failed"] + report["device"].get("failed", 0)
        return report

    def _device_dtypes(self) -> str:
        names = [d for d in self.rep.dtypes if d != "float64" or self.float64[0]]
        return ", ".join(names) or "no dtype"

    def _gradchecked(self, report: dict) -> None:
        self.kernel["gradcheck"] = report
        self.out.metrics["kernel_gradcheck_failed"] = report["failed"]
        for where in ("cpu", "device"):
            failures = report[where].get("failures") or []
            if failures:
                first = failures[0]
                on = "cpu" if where == "cpu" else self.device
                self._fail_once(
                    "accuracy_fail",
                    "gradcheck",
                    error_note(
                        "GradcheckError",
                        f"gradcheck (float64, {on}) failed on {first['sample']}: "
                        f"{first['message']}",
                    ),
                    "gradcheck_fail",
                )

    def _op_values_stage(self) -> dict:
        from torchport.runner import kernel_truth

        return kernel_truth.op_values(
            self.rep.op,
            self.op_variants,
            self.rep.dtypes,
            self.device,
            trains=self.rep.trains,
            float64=self.float64,
            host_scope=self.adapter.host_scope,
        )

    def _op_valued(self, report: dict) -> None:
        self.kernel["op_values"] = report
        self.out.metrics["kernel_op_values_checked"] = report["checked"]
        self.out.metrics["kernel_op_values_failed"] = report["failed"]
        if report["failed"]:
            first = report["failures"][0]
            self._fail_once(
                "accuracy_fail",
                "op_values",
                error_note(
                    "OpMismatch",
                    f"the op on {self.device} against the float64 truth, {first['dtype']} "
                    f"{first['sample']}: {first['message']}",
                ),
                "op_mismatch",
            )

    def _module_input(self, workload, rep):
        """The input the model gives its first targeted module (one eager forward)."""
        import torch

        seen: list = []
        target = next((m for m in workload.model.modules() if rep.matches(m)), None)
        if target is None:
            return None

        def detached(value):
            return value.detach().clone() if isinstance(value, torch.Tensor) else value

        def hook(_module, args, kwargs):
            # keyword arguments too: transformers calls attention by keyword
            if not seen:
                seen.append(
                    (
                        tuple(detached(a) for a in args),
                        {k: detached(v) for k, v in kwargs.items()},
                        _module,
                    )
                )

        handle = target.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            with torch.no_grad():
                workload.model(*workload.args, **workload.kwargs)
        except Exception as exc:
            self.kernel["module_input"] = (
                f"unavailable: the original model raised: {_first_line(exc)}"
            )
            return None
        finally:
            handle.remove()
        return seen[0] if seen else None

    def _samples_stage(self) -> dict:
        """The replacement module against the original module on variants of the input the
        model gave it, both judged against the original in float64 on the CPU."""
        import torch

        from torchport.runner import kernel_truth, kernel_variants

        args, kwargs, module = self.module_input
        tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
        if len(args) == 1 and len(tensors) == 1 and args[0].dim() >= 1:
            found = kernel_variants.from_module_input(args[0])
        else:  # several inputs (attention): layouts only, every input in the same layout
            found = kernel_variants.variants(args, kwargs, sizes=False)
        host = next(m for m in self.workload.model.modules() if self.rep.matches(m))
        report = kernel_truth.module_samples(
            module,
            host,
            self.rep.make,
            found,
            self.rep.dtypes,
            trains=self.rep.trains,
            device=self.device,
            float64=self.float64,
            host_scope=self.adapter.host_scope,
        )
        report["inputs"] = {
            "args": len(args),
            "kwargs": sorted(k for k, v in kwargs.items() if isinstance(v, torch.Tensor)),
        }
        return report

    def _sampled(self, report: dict) -> None:
        self.kernel["samples"] = report
        self.out.metrics["kernel_samples_checked"] = report["checked"]
        self.out.metrics["kernel_samples_failed"] = report["failed"]
        if report["failed"]:
            first = report["failures"][0]
            self._fail_once(
                "accuracy_fail",
                "samples",
                error_note(
                    "SampleMismatch", f"{first['dtype']} {first['sample']}: {first['message']}"
                ),
                "sample_mismatch",
            )

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

    # -- timing -------------------------------------------------------------------------------
    def _timing(self, rep, sides_step: dict, seen) -> None:
        import torch

        start = clock()
        timer = step_timer(self.adapter, steady=True)  # training steps and op calls repeat
        budget = self.config.perf_budget_s
        timing: dict = {"timer": timer.kind, "host": host_load(), "mode": self.mode}
        if "compile" in self.kernel:
            timing["compile"] = self.kernel.pop("compile")
        self.kernel["timing"] = timing
        sides_op: dict = {}
        if seen is not None:
            args, kwargs, module = seen
            new_module = rep.make(module)  # shares its parameters: both sides time the same
            cots = None
            if rep.trains:
                from torchport.execution.steps import flatten_output

                outs = flatten_output(module(*args, **kwargs))
                cots = {k: torch.randn_like(v) for k, v in outs.items()}
            for name, mod in (("original", module), ("replacement", new_module)):
                sides_op[name] = self._op_call(mod, args, kwargs, cots)
        if self.mode == "compile":
            self._compile_op_sides(sides_op, timing)
        for label, sides in (("step", sides_step), ("op", sides_op)):
            if not sides:
                continue
            try:
                # the op alone is a sub-millisecond call: timed in blocks of calls, so the
                # synchronisation and clock reads around each sample are not part of the figure
                if label == "op":
                    samples, calls = sample_blocked(
                        sides, timer, budget_s=budget, min_samples=MIN_ROUNDS
                    )
                else:
                    samples, calls = (
                        sample_interleaved(sides, timer, budget_s=budget, min_samples=MIN_ROUNDS),
                        1,
                    )
            except Exception as exc:
                timing[label] = f"unavailable: {_first_line(exc)}"
                continue
            timing[f"{label}_calls_per_sample"] = calls
            figures = {name: Summary.of(s) for name, s in samples.items()}
            timing[label] = {
                name: {**summary_dict(f), "noisy": noisy(f)} for name, f in figures.items()
            }
            # each round times both sides back to back (order alternating): the per-round
            # ratio sees the same host load on both sides, so it drifts less than either side
            rounds = Summary.of(
                [a / b for a, b in zip(samples["original"], samples["replacement"], strict=True)]
            )
            timing[f"{label}_paired"] = {
                "median": rounds.median_s,
                "p10": rounds.p10_s,
                "p90": rounds.p90_s,
                "n": rounds.n,
                "what": "per-round original / replacement time (above 1: faster)",
            }
            o, r = figures["original"].median_s, figures["replacement"].median_s
            prefix = "step" if label == "step" else "kernel_op"
            self.out.metrics[f"{prefix}_ms_original"] = o * 1e3
            self.out.metrics[f"{prefix}_ms_replacement"] = r * 1e3
            self.out.metrics[f"kernel_{label}_speedup"] = o / r if r > 0 else float("nan")
            if label == "step":  # the replaced model's step: what compare and gate judge
                replaced = figures["replacement"]
                self.out.metrics.update(
                    perf_median_ms=replaced.median_s * 1e3,
                    perf_p10_ms=replaced.p10_s * 1e3,
                    perf_p90_ms=replaced.p90_s * 1e3,
                    perf_samples=replaced.n,
                )
        self.out.durations["timing_s"] = clock() - start

    @staticmethod
    def _op_call(module, args, kwargs, cots):
        """One forward (+ backward with ``cots``) of ``module`` on the captured inputs, its
        floating inputs leaves that need a gradient, as in the model."""
        import torch

        from torchport.execution.steps import flatten_output

        def leaf(v):
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                return v.detach().requires_grad_(cots is not None)
            return v

        def call():
            out = module(*(leaf(a) for a in args), **{k: leaf(v) for k, v in kwargs.items()})
            if cots is not None:
                outs = flatten_output(out)
                pairs = [(t, cots[k]) for k, t in outs.items() if t.requires_grad and k in cots]
                torch.autograd.backward([t for t, _ in pairs], [c for _, c in pairs])
            return out

        return call

    def _compiled_sides(self, original, replaced) -> tuple[dict, dict | None]:
        """Compile each side's training step and call it three times: graphs and graph breaks
        of the first call, recompiles in the later two, per side, and what the replacement
        adds (metrics). Returns the compiled steps and the replaced side's first outputs
        (None when it failed, recorded)."""
        assert self.backend is not None
        report: dict = {}
        self.kernel["compile"] = report
        compile_metrics.reset_dynamo()
        steps: dict = {}
        first_out = None
        for name, w in (("original", original), ("replacement", replaced)):
            step = make_step(self.backend.compile(w.model), w.model, w)
            compile_metrics.clear_counters()
            compile_metrics.clear_compilation_metrics()
            first = capture("compile", step, clock)
            if not first.ok:
                report[name] = {"error": _first_line(first.exc)}
                if name == "replacement":
                    self._fail_once(first.status, "compile", error_value(_exc(first)), "error")
                else:
                    self.out.fail_from(first)
                    self.kernel.update(verdict="error", reason=_first_line(first.exc))
                return steps, None
            snapshot = compile_metrics.counters_snapshot()
            entries = compile_metrics.compilation_metrics()
            compile_metrics.clear_compilation_metrics()
            step()
            step()
            later = compile_metrics.compilation_metrics()
            report[name] = {
                "first_call_s": first.duration_s,
                "graphs": len(entries) if isinstance(entries, list) else entries,
                "graph_breaks": sum(snapshot.get("graph_break", {}).values())
                if isinstance(snapshot, dict)
                else snapshot,
                "later_recompiles": len(later) if isinstance(later, list) else later,
                "recompile_reasons": [e.get("recompile_reason") for e in later][:5]
                if isinstance(later, list)
                else later,
            }
            steps[name] = step
            first_out = first.value
        for key, metric in (
            ("graph_breaks", "kernel_graph_breaks_added"),
            ("graphs", "kernel_graphs_added"),
            ("later_recompiles", "kernel_recompiles_added"),
        ):
            o, r = report["original"][key], report["replacement"][key]
            if isinstance(o, int) and isinstance(r, int):
                self.out.metrics[metric] = r - o
        return steps, first_out

    def _compile_op_sides(self, sides_op: dict, timing: dict) -> None:
        """The op alone, compiled (each side once, outside timing); dropped if one fails."""
        assert self.backend is not None
        for name in list(sides_op):
            compiled_fn = self.backend.compile(sides_op[name])
            try:
                compiled_fn()
            except Exception as exc:
                timing["op"] = f"unavailable: {name} compiled raised {_first_line(exc)}"
                sides_op.clear()
                return
            sides_op[name] = compiled_fn

    # -- verdict ------------------------------------------------------------------------------
    def _step_noise(self) -> str:
        """Why the step timing cannot tell the sides apart ("" when it can). Decided when the
        per-round ratios' p10-p90 range excludes 1, or the sides' p10-p90 ranges do not
        overlap, or neither side is flagged noisy (a 3x slowdown on a loaded host is still a
        slowdown); otherwise why it is noisy."""
        timing = self.kernel.get("timing")
        step = timing.get("step") if isinstance(timing, dict) else None
        if not isinstance(step, dict) or len(step) != 2:
            return ""
        paired = timing.get("step_paired") or {}  # type: ignore[union-attr]
        if paired and (paired["p10"] > 1.0 or paired["p90"] < 1.0):
            return ""
        o, r = step["original"], step["replacement"]
        apart = r["p10_ms"] > o["p90_ms"] or r["p90_ms"] < o["p10_ms"]
        flagged = [f"{n} {', '.join(s['noisy'])}" for n, s in step.items() if s["noisy"]]
        if apart or not flagged:
            return ""
        return "; ".join(flagged) + (
            f"; per-round ratio p10-p90 {paired['p10']:.2f}-{paired['p90']:.2f} spans 1"
            if paired
            else ""
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
                k["verdict"] = (
                    "correct_noisy_timing"
                    if noise
                    else "correct_faster"
                    if speed > 1.0
                    else "correct_slower"
                )
                k["reason"] = (
                    f"correct ({self._checks_ran()}); training step {speed:.3g}x the original's speed "
                    f"({m['step_ms_original']:.3g} ms -> {m['step_ms_replacement']:.3g} ms, "
                    f"{self.mode})" + (f"; timing noisy: {noise}" if noise else "")
                )
        self.out.findings["kernel"] = k
        return self.out.to_dict()
