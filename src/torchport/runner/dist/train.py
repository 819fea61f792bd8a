"""Training parity of one strategy, as run by each rank of a dist ``train`` case.

k SGD steps of a model on one global batch (``GLOBAL_PER_RANK`` samples per rank): data parallel
strategies (ddp, fsdp2) give each rank its shard of the batch; tensor parallel (tp) gives every
rank the whole batch and shards the weights (column-wise on the first projection, row-wise on
the second). After each step the loss and every parameter (gathered whole) are compared with
one process training the same model on the global batch in float64 on the CPU: ``expected``,
computed once per model, seed, global batch and steps in a clean child and cached
(``execution/dist_reference.py``); the ranks of every strategy read the same file.

Mode ``compile``: ``torch.compile`` on the sharded (wrapped) model, with the device's backend.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.distributed as dist

from torchport.cases.dist_models import GLOBAL_PER_RANK, LR, MODELS, global_batch, loss
from torchport.records.words import listed
from torchport.timing import Summary, clock

# float32 on the device against float64: a few SGD steps of a small model stay far inside this
REL_TOLERANCE = 1e-4
_ATTENTION = {
    "lm.model.layers.*.self_attn.q_proj": "colwise",
    "lm.model.layers.*.self_attn.k_proj": "colwise",
    "lm.model.layers.*.self_attn.v_proj": "colwise",
    "lm.model.layers.*.self_attn.o_proj": "rowwise",
}
TP_PLANS = {
    "mlp": {"up": "colwise", "down": "rowwise"},
    "llama": {
        **_ATTENTION,
        "lm.model.layers.*.mlp.gate_proj": "colwise",
        "lm.model.layers.*.mlp.up_proj": "colwise",
        "lm.model.layers.*.mlp.down_proj": "rowwise",
    },
    # the experts are fused 3-d parameters with a router: replicated (expert parallel is not TP)
    "qwen3_moe": dict(_ATTENTION),
}
# Replicated parameters that act on each rank's local heads only (qwen3's per-head q/k RMSNorm
# sits between the column-wise q/k projections and attention): each rank's gradient is its
# heads' part, so tensor parallel sums them over the ranks (TorchTitan shards these norms).
TP_PARTIAL_GRADS = {"qwen3_moe": ("self_attn.q_norm.weight", "self_attn.k_norm.weight")}


def _full(param) -> torch.Tensor:
    """A parameter as one whole CPU tensor (DTensor shards gathered)."""
    full = getattr(param, "full_tensor", None)
    value = full() if full is not None else param
    return value.detach().to("cpu", torch.float64)


def _wrap(strategy: str, model_name: str, model, device: str, world: int):
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.split(":")[0], (world,))
    if strategy == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        return fully_shard(model, mesh=mesh)
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    plan = {name: styles[kind]() for name, kind in TP_PLANS[model_name].items()}
    return parallelize_module(model, mesh, plan)


def _sum_partial_grads(model, model_name: str) -> None:
    suffixes = TP_PARTIAL_GRADS.get(model_name, ())
    for name, param in model.named_parameters():
        if param.grad is not None and name.endswith(suffixes):
            dist.all_reduce(param.grad)


def _at(stage: str, fn):
    """``fn()``; an exception it raises carries the stage it came from (the rank classifies
    it: a compiler error in the first compiled step is a compile_fail, and so on)."""
    try:
        return fn()
    except Exception as exc:
        if not hasattr(exc, "torchport_stage"):
            exc.torchport_stage = stage  # type: ignore[attr-defined]
        raise


def left_on_host(model, device: str) -> list[dict]:
    """Parameters and buffers of ``model`` not on ``device``'s type after its move (the
    placement probe's class (c) evidence, ``probes.placement.off_device``); none on the CPU."""
    target = device.split(":")[0]
    if target == "cpu":
        return []
    from torchport.probes.placement import off_device

    return off_device(model, target)[0]


def placement_note(left: list[dict]) -> str:
    """``left`` in words, for a failure's message."""
    named = listed([f"{t['name']} ({t['kind']}, on {t['device']})" for t in left])
    return f"placement evidence (class c): left on the host by the move: {named}"


# the observation after a failure: a short pass, never a hang of the rank
HOST_OPS_BUDGET_S = 60.0


def observe_host_ops(
    model_name: str, seed: int, device: str, adapter, budget_s: float = HOST_OPS_BUDGET_S
) -> dict:
    """After a strategy has failed on ``device`` (the verdict decided: an instrument never
    runs in the pass that decides status, docs/design.md rule 10), one forward+backward of
    the plain model under the placement probe's recorders: ``{"host_ops": [...]}``, the ops
    served on the host with evidence class a or b, or ``{"observation_failed": "<one line>"}``
    when the observation itself fails or outlasts ``budget_s`` (its thread is left behind)."""
    import threading

    from torchport.probes import placement

    got: dict = {}

    def run() -> None:
        try:
            torch.manual_seed(seed)
            model = MODELS[model_name]().to(device)
            x, y = (t.to(device) for t in global_batch(seed, GLOBAL_PER_RANK, model))

            def step():
                model.zero_grad(set_to_none=True)
                value = loss(model(x), y)
                value.backward()
                return value.detach()

            result = placement.observe(adapter, step, device.split(":")[0], nested=False)
            rows = placement.host_ops(placement.op_table(result, device.split(":")[0]))
            got["host_ops"] = [
                {"op": r["op"], "count": r["count"], "evidence_class": r["evidence_class"]}
                for r in rows
                if r.get("evidence_class") in ("a", "b")
            ]
        except Exception as exc:  # the observation's failure, never the strategy's
            got["observation_failed"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]

    worker = threading.Thread(target=run, name="torchport-host-ops", daemon=True)
    worker.start()
    worker.join(budget_s)
    if worker.is_alive():
        return {"observation_failed": f"took over {budget_s:g} s, abandoned"}
    return got


def host_ops_note(observed: dict) -> str:
    """``observe_host_ops``'s answer in words, for a failure's message."""
    if "observation_failed" in observed:
        return f"placement observation failed: {observed['observation_failed']}"
    rows = observed["host_ops"]
    named = listed([f"{r['op']} (class {r['evidence_class']})" for r in rows])
    return f"placement evidence: ops served on the host: {named}"


@contextlib.contextmanager
def _cited(left: list[dict], observe=None):
    """An exception raised inside carries ``left`` (the rank adds it to the failure) and
    ``observe``, the host-op observation the rank runs once the failure is recorded."""
    try:
        yield
    except Exception as exc:
        if left and not hasattr(exc, "torchport_placement"):
            exc.torchport_placement = left  # type: ignore[attr-defined]
        if observe is not None and not hasattr(exc, "torchport_observe"):
            exc.torchport_observe = observe  # type: ignore[attr-defined]
        raise


def train_parity(
    spec,
    *,
    mode,
    rank,
    world,
    device,
    seed,
    adapter,
    progress,
    expected: list[dict],
    compile_backend: str | None = None,
) -> dict:
    """``expected``: per step, the loss and every parameter of one float64 process on the
    global batch (``execution.dist_reference.train_history``). ``compile_backend``: the run's
    ``--compile-backend`` (else the device's own choice, as the single-device ladder makes)."""
    strategy, model_name, steps = spec.strategy, spec.model, spec.steps
    if len(expected) < steps:
        raise ValueError(f"the reference has {len(expected)} steps, the case trains {steps}")
    torch.manual_seed(seed)
    model = MODELS[model_name]().to(device)
    # parameters and buffers the move left on the host (placement's evidence class c): a
    # strategy that fails on them says so, a pass records them
    left = left_on_host(model, device)
    observe = None
    if not device.startswith("cpu"):  # on the CPU the host is the device: nothing to observe
        observe = lambda: observe_host_ops(model_name, seed, device, adapter)  # noqa: E731
    with _cited(left, observe):
        progress(f"{strategy} wrap")
        wrapped = _wrap(strategy, model_name, model, device, world)
        step_fn = wrapped
        choice = None
        if mode == "compile":
            from torchport.execution import compile_backend as backends

            choice = _at("compile", lambda: backends.choose(adapter, compile_backend))
            step_fn = choice.compile(wrapped)
        x, y = global_batch(seed, GLOBAL_PER_RANK * world, model)
        if strategy in ("ddp", "fsdp2"):  # this rank's shard of the global batch
            x = x[rank * GLOBAL_PER_RANK : (rank + 1) * GLOBAL_PER_RANK]
            y = y[rank * GLOBAL_PER_RANK : (rank + 1) * GLOBAL_PER_RANK]
        x, y = x.to(device), y.to(device)
        # foreach=False: tensor parallel leaves DTensor and plain parameters side by side
        opt = torch.optim.SGD(wrapped.parameters(), lr=LR, foreach=False)
        adapter.reset_peak_memory()
        times, detail = [], []
        worst: dict[str, Any] = {"name": None, "step": None, "rel_err": 0.0}
        names = [n for n, _ in model.named_parameters()]
        for step in range(steps):
            progress(f"{strategy} step {step} ({mode})")
            adapter.synchronize()
            start = clock()
            opt.zero_grad()
            # the first compiled step compiles: its failure is the compiler's (or the compiled
            # code's, which classify tells apart)
            stage = "run" if mode != "compile" else "compile" if step == 0 else "compiled_run"

            def one_step():
                step_loss = loss(step_fn(x), y)
                step_loss.backward()
                if strategy == "tp":
                    _sum_partial_grads(model, model_name)
                opt.step()
                adapter.synchronize()
                return step_loss

            step_loss = _at(stage, one_step)
            times.append(clock() - start)
            global_loss = step_loss.detach().to(torch.float64)
            if strategy in ("ddp", "fsdp2"):  # the mean over equal shards is the global mean
                dist.all_reduce(global_loss)
                global_loss = global_loss / world
            ref = expected[step]
            loss_err = abs(float(global_loss) - ref["loss"]) / max(abs(ref["loss"]), 1e-12)
            step_worst: dict[str, Any] = {"name": "loss", "step": step, "rel_err": loss_err}
            params = dict(model.named_parameters())
            for name in names:
                got, want = _full(params[name]), ref["params"][name]
                err = float((got - want).abs().max()) / max(float(want.abs().max()), 1e-12)
                if err > step_worst["rel_err"]:
                    step_worst = {"name": name, "step": step, "rel_err": err}
            detail.append(
                {
                    "step": step,
                    "loss": float(global_loss),
                    "reference_loss": ref["loss"],
                    **step_worst,
                }
            )
            if step_worst["rel_err"] >= worst["rel_err"]:
                worst = step_worst
        return {
            "strategy": strategy,
            "model": model_name,
            "mode": mode,
            "steps": steps,
            "passed": worst["rel_err"] <= REL_TOLERANCE,
            "tolerance_rel": REL_TOLERANCE,
            "worst": worst,
            # the first step pays for compiling and allocating: the step time is after it
            **({"compile_backend": choice.to_dict()} if choice is not None else {}),
            "step_s": Summary.of(times[1:] or times).median_s,
            "first_step_s": times[0],
            "peak_bytes": adapter.peak_memory_bytes(),
            "steps_detail": detail,
            **({"left_on_host": left} if left else {}),
        }
