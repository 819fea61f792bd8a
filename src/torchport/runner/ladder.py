"""The stage ladder for one (case, mode), run inside a worker process.

build -> place -> run -> compile -> compiled_run -> parity, then the requested probes, each in
its own pass. The status is the first stage that failed; every stage's duration is recorded.

The steps whose numbers parity compares are ``Compared`` steps (steps.py): training steps in
training mode, starting from the placed state, dropout masks drawn the same way on every side,
running statistics returned with the outputs. The probes get plain steps of the same model.
"""

from __future__ import annotations

import os
from typing import Callable

from torchport.cases.base import Case, Size
from torchport.config import COLD_WORKER_ENV, LOW_PRECISION, RunConfig
from torchport.execution.build import build_workload, step_info
from torchport.execution.steps import Compared, first_compiled_step, make_step, place, to_cpu
from torchport.probes import compile_metrics, parity
from torchport.probes.base import Subject
from torchport.records.result import (
    Result, capture, error_note, error_value, skipped,
)
from torchport.timing import clock


class Ladder:
    """Runs the stages; each returns False once the ladder must stop."""

    def __init__(self, case: Case, mode: str, config: RunConfig, adapter, emit: Callable,
                 reference_cache: dict):
        self.case, self.mode, self.config, self.adapter = case, mode, config, adapter
        self.emit, self.reference_cache = emit, reference_cache
        self.out = Result(case=case.id, case_version=case.version, mode=mode)
        self.case_deadline = clock() + config.timeout_s
        self.out.findings["tags"] = list(case.tags)
        self.backend = None  # the compile backend chosen (compile mode), with why

    def stage(self, name: str, fn: Callable[[], object]):
        """Run one stage; on an exception record the failure and return (False, None)."""
        self.emit({"event": "stage", "stage": name})

        def synchronised():
            value = fn()
            self.adapter.synchronize()
            return value
        done = capture(name, synchronised, clock)
        self.out.durations[f"{name}_s"] = done.duration_s
        if not done.ok:
            self.out.fail_from(done)
            return False, None
        return True, done.value

    def run(self) -> dict:
        import torch
        if self.case.skip_reason:
            return skipped(self.case.id, self.mode, case_version=self.case.version,
                           reason=self.case.skip_reason, tags=tuple(self.case.tags)).to_dict()
        config, dtype = self.config, getattr(torch, self.config.dtype)
        size = Size(batch=config.batch, seq=config.seq)
        ok, workload = self.stage("build", lambda: self._build(size))
        if not ok:
            return self.out.to_dict()
        self.out.findings["workload"] = workload.meta
        self.out.findings["step"] = step_info(workload)
        ok, placed = self.stage("place", lambda: place(workload, self.adapter.device(), dtype))
        if not ok:
            return self.out.to_dict()
        module = placed.model
        compared = Compared(config.seed)
        eager_step = make_step(module, module, placed)
        ok, result = self.stage("run", lambda: to_cpu(make_step(
            module, module, placed, compared=compared)()))
        if not ok:
            return self.out.to_dict()
        runner, step, cold_compile = module, eager_step, None
        if self.mode == "compile" and not self._choose_backend():
            return self.out.to_dict()
        if self.mode == "compile":
            cold = COLD_WORKER_ENV in os.environ  # a fresh process with empty compile caches
            if cold:
                compile_metrics.start_recording()
            ok, compiled = self.stage("compile", lambda: first_compiled_step(
                self._compile, module, placed, compared=compared))
            if not ok:
                return self.out.to_dict()
            runner, compared_step = compiled
            step = make_step(runner, module, placed)
            ok, result = self.stage("compiled_run", lambda: to_cpu(compared_step()))
            if not ok:
                return self.out.to_dict()
            # Masked dropout calls are graph breaks the user's program does not have: then
            # the compile probe measures the cold compile in a child of its own.
            if cold and not compared.masked_calls:
                d = self.out.durations
                cold_compile = compile_metrics.first_step_record(
                    self.adapter, d["compile_s"], d["compiled_run_s"], d["run_s"])
        # The reference runs after the device so that a fault in the model shows at the
        # device stage that met it; it is computed once per case and shared by the modes.
        ok, references = self.stage("reference", lambda: self._reference(workload, size, dtype))
        if not ok:
            return self.out.to_dict()
        ok, report = self.stage("parity", lambda: self._parity(result, *references,
                                                               workload.tolerance))
        if ok and not report.ok:
            self.out.fail("accuracy_fail", "parity", error_note("ParityMismatch",
                                                                report.message()))
        subject = Subject(case=self.case, mode=self.mode, config=config, adapter=self.adapter,
                          device=self.adapter.device(), dtype=dtype, workload=placed,
                          model=module, runner=runner, step=step,
                          make_runner=lambda: self._compile(module) if self.mode == "compile"
                          else module, emit=self.emit, case_deadline=self.case_deadline,
                          cold_compile=cold_compile)
        self._probes(subject)
        return self.out.to_dict()

    def _key(self, size: Size) -> tuple:
        return (self.case.id, self.config.seed, size, self.config.dtype)

    def _build(self, size: Size):
        key = self._key(size)
        cached = self.reference_cache.get(key)
        if cached is None:
            self.reference_cache.clear()  # keep one case's tensors alive at a time
            workload = build_workload(self.case, seed=self.config.seed, size=size)
            cached = self.reference_cache[key] = {"workload": workload}
        return cached["workload"]

    def _reference(self, workload, size: Size, dtype) -> tuple[dict, dict]:
        """(CPU float64 reference, CPU baseline at the run's dtype) output tensors.

        Both are compared steps like the device's. Only buffers the reference step changed
        (running statistics) are compared; random ops left uncontrolled are recorded.
        """
        import torch

        from torchport.execution.randomness import DESCRIPTION, METHOD, watch_random_ops
        cached = self.reference_cache[self._key(size)]
        if "reference" not in cached:
            ref64 = place(workload, "cpu", torch.float64)
            compared = Compared(self.config.seed)
            with watch_random_ops() as watch:
                reference = to_cpu(make_step(ref64.model, ref64.model, ref64,
                                             compared=compared)())
            for name in [k for k in reference if k.startswith("buffer.")]:
                if name not in compared.changed:
                    del reference[name]
            # The baseline is the CPU at the run's dtype: the noise the device is allowed.
            base = place(workload, "cpu", dtype)
            baseline = to_cpu(make_step(base.model, base.model, base,
                                        compared=Compared(self.config.seed))())
            cached["reference"] = (reference, baseline)
            cached["randomness"] = {"method": METHOD, "description": DESCRIPTION,
                                    "masked_dropout_calls": compared.masked_calls,
                                    "uncontrolled_random_ops": dict(watch.ops),
                                    "compared_buffers": sorted(compared.changed)}
        self.out.findings["step"]["randomness"] = cached["randomness"]
        return cached["reference"]

    def _choose_backend(self) -> bool:
        """The compile backend for this device, recorded with why; False (compile_fail) when
        none can compile for it."""
        from torchport.execution.compile_backend import NoCompileBackend, choose
        try:
            self.backend = choose(self.adapter, self.config.compile_backend)
        except NoCompileBackend as exc:
            self.emit({"event": "stage", "stage": "compile"})
            self.out.fail("compile_fail", "compile", error_note("NoCompileBackend", str(exc)))
            return False
        self.out.findings["compile_backend"] = self.backend.to_dict()
        return True

    def _compile(self, module):
        import torch
        return torch.compile(module, backend=self.backend.name)

    def _parity(self, result, reference, baseline, tolerance):
        atol, rtol = (tolerance.atol, tolerance.rtol) if tolerance else self.config.tolerance
        # On the CPU, the eager run at the run's dtype is the baseline itself: judged by the
        # dtype's ceiling against float64, never passed against its own noise.
        basis = "baseline" if (self.adapter.torch_type == "cpu" and self.mode == "eager") \
            else "device"
        report = parity.compare(result, reference, baseline, atol=atol, rtol=rtol,
                                low_precision=self.config.dtype in LOW_PRECISION,
                                dtype=self.config.dtype, basis=basis)
        self.out.probe_versions["parity"] = parity.PROBE_VERSION
        self.out.metrics.update({k: v for k, v in report.metrics().items() if v is not None})
        self.out.findings["parity_failures"] = report.failures()[:50]
        self.out.findings["parity"] = report.findings()
        uncontrolled = self.out.findings["step"].get("randomness", {}).get(
            "uncontrolled_random_ops")
        if uncontrolled and not report.ok:
            self.out.findings["parity"]["note"] = (
                "the step draws random numbers torchport does not control ("
                + ", ".join(sorted(uncontrolled)) + "): a device's generator differs from the "
                "CPU's, which alone can fail parity")
        return report

    def _probes(self, subject: Subject) -> None:
        from torchport.probes.registry import load_probe
        for name in self.config.probes:
            probe = load_probe(name)
            if not probe.applies(subject):
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
                    {**error_value(exc), "probe": name, "status": "crash"})
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
