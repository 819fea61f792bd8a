"""The stage ladder of one (case, mode) in the ``generate`` scenario.

The same stages and status vocabulary as training (``Ladder``), over a greedy generation:

build      the case, on the CPU; a model generate cannot drive is a ``skip`` with why
place      model (eval mode) on the device
run        an eager generation: the first prompt length, the first batch, ``new_tokens``
compile    compile mode: prefill and decode compiled (``fullgraph`` where the cache is static;
           a fullgraph failure falls back to graph breaks, recorded), and the first compiled
           generation, which compiles both graphs: their cold compile is recorded
compiled_run  a second compiled generation: the one parity checks
reference  the same generation on the CPU in float64 (and at the run's dtype, the baseline),
           in the clean reference child, cached
parity     tokens and logits against it (``instruments.token_parity``)

Then the probes that measure generation (``Probe.scenarios``): ``serve`` (TTFT, TPOT,
tokens/s, recompiles) and ``placement`` on one decode step.
"""

from __future__ import annotations

from typing import Any

from torchport.cases.base import Size
from torchport.execution import generation
from torchport.execution import reference as reference_mod
from torchport.execution.steps import place, to_cpu
from torchport.instruments import compile_metrics, compile_outcome, token_parity
from torchport.probes.serve import CompileCounter, batches_for
from torchport.records.result import error_note
from torchport.runner.ladders.model import Ladder
from torchport.runner.stages import Stage
from torchport.timing import step_timer

STEP_KIND = "greedy generation: prefill, then decode with a KV cache"


class GenerateLadder(Ladder):
    STAGES = (
        Stage("build", "_build_stage", then="_built_generation"),
        Stage("place", "_place_generation", then="_placed_generation"),
        Stage("run", "_eager_generation"),
        Stage(
            "compile",
            "_compile_stage",
            modes=("compile",),
            before="_choose_backend",
            then="_compiled",
        ),
        Stage("compiled_run", "_compiled_generation", modes=("compile",)),
        Stage("reference", "_reference_stage"),
        Stage("parity", "_parity_stage", required=False, then="_judged"),
    )

    def begin(self) -> None:
        super().begin()  # the case's skip, the dtype
        self.size = Size(batch=self.config.batch)  # the build's: no sequence length

    def _built_generation(self, workload) -> None:
        try:
            generation.check_causal_lm(workload.model)
        except generation.NotCausalLM as exc:
            self._skip(f"not run in scenario generate: {exc}")
        self.workload = workload
        self.out.findings["workload"] = workload.meta
        self.out.findings["step"] = {"kind": STEP_KIND, "mode": "eval"}

    def _place_generation(self):
        return self._place(self.workload, self.dtype)

    def _placed_generation(self, placed) -> None:
        config = self.config
        self.placed = placed
        self._numerics()
        model = placed.model
        plan = generation.cache_plan(model)
        self.setup = generation.Setup(
            model=model,
            plan=plan,
            caches=generation.Caches(model, plan, max(config.prompt_lengths) + config.new_tokens),
            seed=config.seed,
            sides={"eager": generation.step_functions(model)},
        )
        self.batch, self.length = batches_for(config, self.adapter)[0], config.prompt_lengths[0]
        self.info = self.out.findings["generate"] = {
            "cache": plan.to_dict(),
            "parity_prompt": {
                "batch": self.batch,
                "length": self.length,
                "new_tokens": config.new_tokens,
            },
        }

    def _eager_generation(self) -> dict:
        return self._generation(self.setup, "eager", self.batch, self.length)

    def _compile_stage(self) -> dict:
        return self._compile_steps(self.setup, self.batch, self.length)

    def _compiled(self, compiled: dict) -> None:
        self.info["compile"] = compiled
        if compiled["outcome"]["graphs_to_backend"] == 0:  # rule 9: a graph reached it
            self.stop_at("compile", error_note("NotCompiled", "no graph"))

    def _compiled_generation(self) -> dict:
        return self._generation(self.setup, "compiled", self.batch, self.length)

    def _reference_stage(self) -> dict:
        return self._generation_reference(Size(batch=self.batch, seq=self.length))

    def _parity_stage(self):
        result = self.got.get("compiled_run", self.got["run"])
        return self._token_parity(result, self.got["reference"])

    def _judged(self, report) -> None:
        if not report.ok:
            self.out.fail_at("parity", error_note("ParityMismatch", report.message()))

    def end(self) -> None:
        setup, batch, length = self.setup, self.batch, self.length
        side = "compiled" if self.mode == "compile" else "eager"
        self._probes(
            self._subject(
                workload=self.placed,
                model=self.placed.model,
                runner=setup.sides[side][1],
                step=setup.decode_step(side, batch, length),
                make_runner=lambda: setup.sides[side][1],
                generation=setup,
            )
        )
        if "placement_observed" in self.out.findings:
            self.out.findings["placement_step"] = (
                f"one decode step ({side}, batch {batch}, after a {length}-token prefill, "
                f"{setup.plan.kind} cache)"
            )

    def _place(self, workload, dtype):
        placed = place(workload, self.adapter.device(), dtype, host_scope=self.adapter.host_scope)
        placed.model.eval()  # serving: dropout off
        return placed

    def _generation(self, setup, side: str, batch: int, length: int) -> dict:
        """One greedy generation with its logits, waited on, then copied to the host."""
        done = setup.run(side, batch, length, self.config.new_tokens, keep_logits=True)
        self.adapter.wait_for(done.logits)
        return to_cpu({"tokens": done.tokens, "logits": done.logits})

    def _compile_steps(self, setup, batch: int, length: int) -> dict:
        """Compile prefill and decode and run the first compiled generation (their cold
        compile, in this worker). fullgraph as the cache plan asks; when that fails, again
        with graph breaks allowed, and the failure is recorded."""
        assert self.backend is not None, "the backend is chosen before compiling"
        # prefill and decode are the same code objects for every model: frames compiled for
        # an earlier case would count against dynamo's recompile limit
        compile_metrics.reset_dynamo()
        fullgraph, found = setup.plan.fullgraph, dict[str, Any]()
        before = compile_metrics.counters_snapshot()
        try:
            first, counted, outcome = self._first_compiled_generation(
                setup, batch, length, fullgraph
            )
        except Exception as exc:
            if not fullgraph:
                raise
            compile_metrics.reset_dynamo()
            found["fullgraph_failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            fullgraph = False
            first, counted, outcome = self._first_compiled_generation(
                setup, batch, length, fullgraph
            )
        found.update(
            fullgraph=fullgraph,
            outcome=outcome.to_dict(),
            first_prefill_s=first.prefill_s,
            first_decode_s=first.decode_s[0],
            phases=counted.summary(),
            cache=_cache_delta(before, compile_metrics.counters_snapshot()),
            backend=self.backend.to_dict(),
        )
        return found

    def _first_compiled_generation(self, setup, batch: int, length: int, fullgraph: bool):
        assert self.backend is not None
        eager = setup.sides["eager"]
        setup.sides["compiled"] = tuple(
            self.backend.compile(fn, fullgraph=fullgraph) for fn in eager
        )
        counter = CompileCounter()
        timer = step_timer(self.adapter)
        with compile_outcome.watch() as outcome:
            first = setup.run(
                "compiled",
                batch,
                length,
                self.config.new_tokens,
                timer=timer,
                wrap=counter.wrap_pair,
            )
        return first, counter, outcome

    def _generation_reference(self, size: Size) -> dict:
        """The float64 CPU generation, from the clean child's disk cache (rule 8)."""
        spec = reference_mod.spec_for(
            self.case, self.config, size, task="generate", new_tokens=self.config.new_tokens
        )
        local = None if reference_mod.rebuildable(self.case, self.config) else self.case
        with self.adapter.host_scope():
            value = reference_mod.obtain(spec, local, timeout_s=max(self._time_left(), 30.0))
        self._record_reference(value)
        return value

    def _time_left(self) -> float:
        from torchport.timing import clock

        return self.case_deadline - clock()

    def _token_parity(self, result: dict, reference: dict) -> token_parity.TokenParity:
        atol, rtol = self.config.tolerance
        basis = self._parity_basis()
        with self.adapter.host_scope():
            found = token_parity.compare(
                result,
                reference["reference"],
                reference["baseline"],
                atol=atol,
                rtol=rtol,
                dtype=self.config.dtype,
                basis=basis,
            )
        self.out.probe_versions["generate_parity"] = token_parity.PROBE_VERSION
        self.out.metrics.update(found.metrics())
        self.out.findings["generate_parity"] = found.findings()
        return found


def _cache_delta(before, after) -> dict | str:
    """Inductor/AOT cache hits and misses during the compile (cold: misses only)."""
    if compile_metrics.is_unavailable(before) or compile_metrics.is_unavailable(after):
        return before if isinstance(before, str) else after
    delta = {
        group: {
            name: after.get(group, {}).get(name, 0) - before.get(group, {}).get(name, 0)
            for name in names
        }
        for group, names in compile_metrics.CACHE_COUNTERS.items()
    }
    return compile_metrics.cache_counts(delta)
