"""The timing of a kernel case (runner/kernels/ladder.py): the op alone and the whole training
step, with and without the replacement, interleaved and synchronised (``timing.py``), in the
task's mode (in compile mode each side compiled once, with the graphs, graph breaks and
recompiles the replacement adds); and whether the step timing can tell the sides apart.
"""

from __future__ import annotations

from torchport.execution.steps import make_step
from torchport.instruments import compile_metrics
from torchport.probes.perf import host_load, noisy, summary_dict
from torchport.records.result import capture, error_value
from torchport.runner.kernels.op_stages import KernelChecks, _exc, _first_line
from torchport.timing import Summary, clock, sample_blocked, sample_interleaved, step_timer

# timed rounds at least (each round: both sides once): the per-round ratios decide a noisy step
MIN_ROUNDS = 20


class KernelTiming(KernelChecks):
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
