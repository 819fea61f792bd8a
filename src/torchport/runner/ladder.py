"""The stage ladder for one (case, mode), run inside a worker process.

build -> place -> run -> compile -> compiled_run -> parity, then the requested probes, each in
its own pass. The status is the first stage that failed; every stage's duration is recorded.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from torchport.cases.base import Case, Size
from torchport.config import COLD_WORKER_ENV, LOW_PRECISION, RunConfig
from torchport.execution.build import build_workload
from torchport.execution.steps import first_compiled_step, make_step, place, to_cpu
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
        reason = self.case.skip_reason_for(mode=self.mode, device=self.adapter.device())
        if reason:
            return skipped(self.case.id, self.mode, case_version=self.case.version,
                           reason=reason, tags=tuple(self.case.tags)).to_dict()
        config, dtype = self.config, getattr(torch, self.config.dtype)
        size = Size(batch=config.batch, seq=config.seq)
        ok, workload = self.stage("build", lambda: self._build(size))
        if not ok:
            return self.out.to_dict()
        self.out.findings["workload"] = workload.meta
        ok, placed = self.stage("place", lambda: place(workload, self.adapter.device(), dtype))
        if not ok:
            return self.out.to_dict()
        module = placed.model
        eager_step = make_step(module, module, placed)
        ok, result = self.stage("run", lambda: to_cpu(eager_step()))
        if not ok:
            return self.out.to_dict()
        runner, step, cold_compile = module, eager_step, None
        if self.mode == "compile":
            cold = COLD_WORKER_ENV in os.environ  # a fresh process with empty compile caches
            if cold:
                compile_metrics.start_recording()
            ok, compiled = self.stage("compile", lambda: first_compiled_step(
                self._compile, module, placed))
            if not ok:
                return self.out.to_dict()
            runner, step = compiled
            ok, result = self.stage("compiled_run", lambda: to_cpu(step()))
            if not ok:
                return self.out.to_dict()
            if cold:
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
            self.out.fail("accuracy_fail", "parity", error_note(
                "ParityMismatch", "outside tolerance: " + ", ".join(report.failures()[:8])))
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
        """(CPU float64 reference, CPU baseline at the run's dtype) output tensors."""
        import torch
        cached = self.reference_cache[self._key(size)]
        if "reference" not in cached:
            if workload.reference_model is not None:  # the same function, computed otherwise
                workload = dataclasses.replace(workload, model=workload.reference_model)
            ref64 = place(workload, "cpu", torch.float64)
            reference = to_cpu(make_step(ref64.model, ref64.model, ref64)())
            # The baseline is the CPU at the run's dtype: the noise the device is allowed.
            base = place(workload, "cpu", dtype)
            baseline = to_cpu(make_step(base.model, base.model, base)())
            cached["reference"] = (reference, baseline)
        return cached["reference"]

    def _compile(self, module):
        import torch
        backend = self.config.compile_backend or self.adapter.default_compile_backend
        return torch.compile(module, backend=backend)

    def _parity(self, result, reference, baseline, tolerance):
        atol, rtol = (tolerance.atol, tolerance.rtol) if tolerance else self.config.tolerance
        report = parity.compare(result, reference, baseline, atol=atol, rtol=rtol,
                                low_precision=self.config.dtype in LOW_PRECISION)
        self.out.probe_versions["parity"] = parity.PROBE_VERSION
        self.out.metrics.update({k: v for k, v in report.metrics().items() if v is not None})
        self.out.findings["parity_failures"] = report.failures()[:50]
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
