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
noise (``runner/speed_verdict.py``), ``opcheck_fail``, ...) with its reason; the
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
from torchport.records.result import capture, error_note, error_value
from torchport.runner import kernel_checks
from torchport.runner.speed_verdict import gap_unclear
from torchport.runner.stages import Stage, StageRunner, Stop
from torchport.timing import Summary, clock, sample_blocked, sample_interleaved, step_timer

# relative error (max abs err / max |reference|) the whole-model A/B allows, by the dtype it ran
# in: float64 allows for an original that computes in float32 inside
MODEL_TOLERANCE = {"float64": 1e-4, "float32": 1e-3}
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

    # -- the ladder -------------------------------------------------------------------------
    # Declared to the stage runner (runner/stages.py). The checks (opcheck, gradcheck,
    # samples) run only when there is something to check, and a check's failure does not end
    # the climb: the first failure decides the status (``_fail_once``), later stages still
    # record what they saw. The whole-model A/B and the timing record their own outcome.
    STAGES = (
        Stage("build", "_build_stage", synchronise=False, failed="_build_failed", then="_built"),
        _check("op_call", when="_has_custom_op", before="_float32_samples", then="_op_called"),
        _check("opcheck", when="_op_runs", then="_opchecked"),
        _check(
            "gradcheck", when="_checks_gradients", before="_float64_samples", then="_gradchecked"
        ),
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

    def _opcheck_stage(self) -> dict:
        return kernel_checks.opcheck(self.rep.op, self.op_samples)

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

    def _float64_samples(self) -> None:
        import torch

        self.op_samples = self.rep.op_samples(torch.float64, self.device)

    def _gradcheck_stage(self) -> dict:
        return kernel_checks.gradcheck(self.rep.op, self.op_samples)

    def _gradchecked(self, report: dict) -> None:
        self.kernel["gradcheck"] = report
        self.out.metrics["kernel_gradcheck_failed"] = report["failed"]
        if report["failed"]:
            first = report["failures"][0]
            self._fail_once(
                "accuracy_fail",
                "gradcheck",
                error_note(
                    "GradcheckError",
                    f"gradcheck (float64) failed on sample {first['sample']}: {first['message']}",
                ),
                "gradcheck_fail",
            )

    def _module_input(self, workload, rep):
        """The input the model gives its first targeted module (one eager forward)."""
        import torch

        seen: list = []
        target = next((m for m in workload.model.modules() if rep.matches(m)), None)
        if target is None:
            return None

        def hook(_module, args):
            if not seen and args and isinstance(args[0], torch.Tensor):
                seen.append((args[0].detach().clone(), _module))

        handle = target.register_forward_pre_hook(hook)
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
        x, module = self.module_input
        rep = self.rep
        return kernel_checks.compare_samples(module, rep.make, x, rep.dtypes, rep.trains)

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
        """The replaced model against the same model with the ORIGINAL modules in eager,
        float64 where the device allows it. ``got``: the compiled replaced model's first step
        (compile mode, at the run's dtype); None: the replaced model in eager, float64 too."""
        import torch

        from torchport.cases.kernels import swap_modules

        start = clock()
        tensors: dict = {}
        for dtype_name in ("float64", "float32"):
            try:
                dtype = getattr(torch, dtype_name)
                ref_w = place(workload, self.device, dtype, host_scope=self.adapter.host_scope)
                tensors["original"] = make_step(ref_w.model, ref_w.model, ref_w)()
            except Exception as exc:  # the device refuses this dtype: try the next
                tensors["refused"] = f"{dtype_name}: {_first_line(exc)}"
                continue
            break
        else:
            self._fail_once(
                "eager_fail", "model", error_note("ModelError", tensors["refused"]), "error"
            )
            return
        if got is None:
            new_w = place(workload, self.device, dtype, host_scope=self.adapter.host_scope)
            swap_modules(new_w.model, rep)
            done = capture("run", make_step(new_w.model, new_w.model, new_w), clock)
            if not done.ok:
                self.kernel["model"] = {"error": _first_line(done.exc)}
                self._fail_once(done.status, "model", error_value(_exc(done)), "error")
                return
            got = done.value
        else:  # compared at the lower precision of the two sides
            dtype_name = "float64" if self.config.dtype == "float64" else "float32"
        self.out.durations["model_s"] = clock() - start
        report = self._compare_tensors(got, tensors["original"], dtype_name)
        if "refused" in tensors:
            report["note"] = f"float64 refused ({tensors['refused']}); compared in float32"
        self.kernel["model"] = report
        self.out.metrics["kernel_model_max_rel_err"] = report["max_rel_err"]
        self.out.metrics["parity_max_rel_err"] = report["max_rel_err"]  # compare's parity drift
        if report["failed"]:
            worst = report["failures"][0]
            self._fail_once(
                "accuracy_fail",
                "model",
                error_note(
                    "ParityMismatch",
                    f"whole model ({dtype_name}) vs the original: "
                    f"{worst['name']} rel err {worst['rel_err']:.3g} > "
                    f"{report['tolerance']:g}"
                    f" ({report['failed']} of {report['compared']} "
                    "tensors)",
                ),
                "model_mismatch",
            )

    @staticmethod
    def _compare_tensors(got: dict, want: dict, dtype_name: str) -> dict:
        tol = MODEL_TOLERANCE[dtype_name]
        rows = []
        missing = sorted(set(want) ^ set(got))
        for name in sorted(set(want) & set(got)):
            a, b = got[name].double().cpu(), want[name].double().cpu()
            if a.shape != b.shape:
                rows.append({"name": name, "rel_err": float("inf"), "abs_err": float("inf")})
                continue
            scale = float(b.abs().max()) if b.numel() else 0.0
            err = float((a - b).abs().max()) if b.numel() else 0.0
            rows.append({"name": name, "abs_err": err, "rel_err": err / max(scale, 1e-30)})
        rows.sort(key=lambda r: -r["rel_err"])
        bad = [r for r in rows if not r["rel_err"] <= tol]
        return {
            "dtype": dtype_name,
            "compared": len(rows),
            "gradients": sum(1 for r in rows if r["name"].startswith("grad.")),
            "failed": len(bad) + len(missing),
            "failures": (bad + [{"name": m, "rel_err": float("inf")} for m in missing])[:10],
            "worst": rows[:5],
            "max_rel_err": rows[0]["rel_err"] if rows else 0.0,
            "tolerance": tol,
            "rule": "max |replaced - original| / max |original| per tensor",
        }

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
            x, module = seen
            new_module = rep.make(module)  # shares its parameters: both sides time the same
            cot = torch.randn_like(module(x)) if rep.trains else None
            for name, mod in (("original", module), ("replacement", new_module)):
                sides_op[name] = self._op_call(mod, x, cot)
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
    def _op_call(module, x, cot):
        def call():
            leaf = x.detach().requires_grad_(cot is not None)
            out = module(leaf)
            if cot is not None:
                out.backward(cot)
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
                    f"correct (opcheck, gradcheck, {m.get('kernel_samples_checked', 0):g} "
                    f"samples, whole model); training step {speed:.3g}x the original's speed "
                    f"({m['step_ms_original']:.3g} ms -> {m['step_ms_replacement']:.3g} ms, "
                    f"{self.mode})"
                    + (f"; timing noisy: {noise}" if noise else "")
                    + (f"; no speed verdict: {unclear}" if unclear else "")
                )
        self.out.findings["kernel"] = k
        return self.out.to_dict()
