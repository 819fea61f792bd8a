"""Training parity of one strategy, as run by each rank of a dist ``train`` case.

k SGD steps of a model on one global batch (``GLOBAL_PER_RANK`` samples per rank): data parallel
strategies (ddp, fsdp2) give each rank its shard of the batch; tensor parallel (tp) gives every
rank the whole batch and shards the weights (column-wise on the first projection, row-wise on
the second). After each step the loss and every parameter (gathered whole) are compared with
one process training the same model on the global batch in float64 on the CPU.

Mode ``compile``: ``torch.compile`` on the sharded (wrapped) model, with the device's backend.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from torchport.timing import Summary, clock

GLOBAL_PER_RANK = 4
LR = 0.1
# float32 on the device against float64: a few SGD steps of a small model stay far inside this
REL_TOLERANCE = 1e-4


class MLP(torch.nn.Module):
    """(B, 16) -> (B, 16): the projections a tensor-parallel plan shards."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):  # (B, 16)
        return self.down(torch.relu(self.up(x)))


class CausalLM(torch.nn.Module):
    """A reduced transformers causal LM (built from its config, random weights): ids -> logits.

    Attention is eager (plain PyTorch, runs in float64). Its forward reshapes q/k/v with
    ``(..., -1, head_dim)``, so a column-wise q/k/v plan gives each rank its local heads
    (heads / tp, as TorchTitan does) with no config change.
    """

    def __init__(self, model_type: str):
        super().__init__()
        from torchport.cases.hf import build_model
        from torchport.cases.hf_shrink import causal_lm_class, make_config

        cfg = make_config(model_type, {})
        self.config = cfg
        self.lm = build_model(causal_lm_class(model_type, cfg), cfg)

    def forward(self, ids):  # (B, S) int64 -> (B, S, V)
        return self.lm(input_ids=ids, use_cache=False).logits


HF_MODELS = ("llama", "qwen3_moe")
HF_SEQ = 16
MODELS: dict[str, Any] = {"mlp": MLP, **{m: (lambda m=m: CausalLM(m)) for m in HF_MODELS}}
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


def _batch(seed: int, world: int, model=None):
    """The global batch: (B, 16) inputs and targets, or (B, S) token ids for a causal LM."""
    g = torch.Generator().manual_seed(seed + 17)
    if isinstance(model, CausalLM):
        vocab = int(model.config.vocab_size)
        ids = torch.randint(vocab, (GLOBAL_PER_RANK * world, HF_SEQ), generator=g)
        return ids, ids
    x = torch.randn(GLOBAL_PER_RANK * world, 16, generator=g)  # (B, 16)
    y = torch.randn(GLOBAL_PER_RANK * world, 16, generator=g)  # (B, 16)
    return x, y


def _loss(out, y):
    if out.dim() == 3:  # next-token cross entropy; every row has S - 1 targets, so shard
        # means average to the global mean
        logits = out[:, :-1].reshape(-1, out.shape[-1])
        return torch.nn.functional.cross_entropy(logits, y[:, 1:].reshape(-1))
    return (out - y).pow(2).mean()


def _cast(x, dtype):
    return x.to(dtype) if x.is_floating_point() else x


def reference(model_name: str, seed: int, world: int, steps: int) -> list[dict]:
    """Per step: the loss and every parameter after the step, one process, float64, CPU."""
    torch.manual_seed(seed)
    model = MODELS[model_name]().double()
    x, y = _batch(seed, world, model)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss = _loss(model(_cast(x, torch.float64)), _cast(y, torch.float64))
        loss.backward()
        opt.step()
        history.append(
            {
                "loss": float(loss.detach()),
                "params": {n: p.detach().clone() for n, p in model.named_parameters()},
            }
        )
    return history


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


def train_parity(spec, *, mode, rank, world, device, seed, adapter, progress) -> dict:
    strategy, model_name, steps = spec.strategy, spec.model, spec.steps
    progress(f"{strategy} reference (one process, float64)")
    with adapter.host_scope():
        expected = reference(model_name, seed, world, steps)
    torch.manual_seed(seed)
    model = MODELS[model_name]().to(device)
    progress(f"{strategy} wrap")
    wrapped = _wrap(strategy, model_name, model, device, world)
    step_fn = wrapped
    if mode == "compile":
        backend = getattr(adapter, "default_compile_backend", None) or "inductor"
        step_fn = torch.compile(wrapped, backend=backend)
    x, y = _batch(seed, world, model)
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
        loss = _loss(step_fn(x), y)
        loss.backward()
        if strategy == "tp":
            _sum_partial_grads(model, model_name)
        opt.step()
        adapter.synchronize()
        times.append(clock() - start)
        global_loss = loss.detach().to(torch.float64)
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
            {"step": step, "loss": float(global_loss), "reference_loss": ref["loss"], **step_worst}
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
        "step_s": Summary.of(times[1:] or times).median_s,
        "first_step_s": times[0],
        "peak_bytes": adapter.peak_memory_bytes(),
        "steps_detail": detail,
    }
