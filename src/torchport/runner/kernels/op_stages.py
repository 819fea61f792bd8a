"""The checks of a kernel case's ladder (runner/kernels/ladder.py) that need no whole model.

op_call    the op called plainly on the device on its samples (custom ops only)
opcheck    ``torch.library.opcheck`` on the device, on variants of the user's own samples
           (runner/kernels/variants.py) in float32 and as given at each other claimed dtype
gradcheck  float64 on the CPU (the op's CPU implementation) over the variants, and on the
           device only where it computes float64 (``DeviceAdapter.float64_support``); else the
           device's gradients are judged at its dtypes against the float64 truth (op_values)
op_values  the op on the device against its float64 CPU run, every variant and dtype
samples    the replacement module against the original on variants of what the model gave
           the first replaced module (positional and keyword inputs), against float64

Each failure is the first failure only (``_fail_once``): later stages still record what they
saw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchport.config import RunConfig
from torchport.execution import compile_backend
from torchport.records.result import error_note, error_value
from torchport.runner.kernels import checks
from torchport.runner.stages import StageRunner


def _first_line(exc: BaseException | None) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:400] if text else ''}"


def _exc(captured) -> BaseException:
    assert captured.exc is not None  # only called on a failed capture
    return captured.exc


class KernelChecks(StageRunner):
    """The kernel ladder's state and its checks; the ladder itself is ``KernelLadder``."""

    # set by the ladder's stages as it climbs (build, place)
    rep: Any  # the Replacement (cases/kernels.py)
    workload: Any  # the host model with the ORIGINAL modules
    dtype: Any
    module_input: Any  # (args, kwargs, module) the model gave the first replaced module
    op_samples: list
    op_variants: list
    placed: tuple
    steps: dict

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
        self.support: dict[str, tuple[bool, str]] = {}  # claimed dtype -> dtype_support

    def _fail_once(self, status: str, stage: str, error: dict, verdict: str) -> None:
        """The first failure decides the status; later stages still record what they saw."""
        if self.out.status == "pass":
            self.out.fail(status, stage, error)
            self.kernel["verdict"] = verdict
            self.kernel["reason"] = error["message"]

    def _check_crashed(self, done) -> None:
        """A check that raised (not one that found a fault): the first failure, as a crash."""
        self._fail_once("crash", done.stage, error_value(_exc(done)), "error")

    def _float32_samples(self) -> None:
        import torch

        self.op_samples = self.rep.op_samples(torch.float32, self.device)

    def _op_call_stage(self):
        # the op called plainly first: opcheck's own instruments (SchemaCheckMode's aliasing
        # checks) need ops a backend may lack, so an op that cannot run on the device at all
        # would read as a wrong registration; it is a failure to run, named as such
        return checks.runs(self.rep.op, self.op_samples)

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
        """Variants of the user's own samples (runner/kernels/variants.py), from float64 CPU
        copies: each check makes them at its dtype on its device."""
        import torch

        from torchport.runner.kernels import variants

        samples = self.rep.op_samples(torch.float64, "cpu")
        self.op_variants = [
            v
            for index, (args, kwargs) in enumerate(samples)
            for v in variants.variants(args, kwargs, index)
        ]

    def _opcheck_stage(self) -> dict:
        """opcheck on the device on every variant in float32, and on the samples as given at
        every other dtype the replacement claims and the device computes."""
        import torch

        calls, skipped = [], []
        for dtype_name in self.rep.dtypes:
            computes, why = self.support.get(dtype_name, (True, ""))
            if not computes:
                skipped.append(f"{dtype_name} not run on {self.device}: {why}")
                continue
            dtype = getattr(torch, dtype_name)
            for var in self.op_variants:
                if dtype_name != "float32" and var.name != "as_given":
                    continue
                calls.append(
                    (f"{dtype_name} {var.label}", var.call_args(var.leaves(dtype, self.device)))
                )
        light = {i for i, (label, _) in enumerate(calls) if not label.endswith(" as_given")}
        report = checks.opcheck(self.rep.op, [c for _, c in calls], light)
        report["aot_dispatch_on"] = "the samples as given (the layout variants: the other tests)"
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
        from torchport.runner.kernels import truth

        if "float64" not in self.rep.dtypes:  # its float64 is no claim of its own to hold
            why = (
                f"gradcheck not run: the replacement claims {', '.join(self.rep.dtypes)}, not "
                "float64; its gradients are judged at those dtypes against the original's "
                "float64 truth (samples, whole model)"
            )
            return {"cpu": {"check": why}, "device": {"check": why}, "failed": 0}
        report: dict = {"cpu": truth.gradcheck(self.rep.op, self.op_variants, "cpu")}
        if self.device.startswith("cpu"):
            report["device"] = {"check": "the CPU gradcheck (the device is the CPU)"}
        elif self.float64[0]:
            ran = truth.gradcheck(self.rep.op, self.op_variants, self.device)
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
        names = [d for d in self.rep.dtypes if self.support.get(d, (True, ""))[0]]
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
        from torchport.runner.kernels import truth

        return truth.op_values(
            self.rep.op,
            self.op_variants,
            self.rep.dtypes,
            self.device,
            trains=self.rep.trains,
            support=self.support,
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

        from torchport.runner.kernels import truth, variants

        args, kwargs, module = self.module_input
        tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
        if len(args) == 1 and len(tensors) == 1 and args[0].dim() >= 1:
            found = variants.from_module_input(args[0])
        else:  # several inputs (attention): layouts only, every input in the same layout
            found = variants.variants(args, kwargs, sizes=False)
        host = next(m for m in self.workload.model.modules() if self.rep.matches(m))
        report = truth.module_samples(
            module,
            host,
            self.rep.make,
            found,
            self.rep.dtypes,
            trains=self.rep.trains,
            device=self.device,
            support=self.support,
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
