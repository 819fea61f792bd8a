"""The models, global batch and loss that the dist suite's ``train`` cases train.

Pure definitions shared by the two sides of a training-parity check: the ranks
(``runner/dist/train.py``, which shards them under a strategy) and the float64 reference of one
process on the global batch (``execution/dist_reference.py``, run in a clean child). Both build
a model with ``torch.manual_seed(seed); MODELS[name]()``, so both start from the same weights.
"""

from __future__ import annotations

from typing import Any

import torch

GLOBAL_PER_RANK = 4  # samples of the global batch per rank
LR = 0.1  # plain SGD, the same on both sides
HF_MODELS = ("llama", "qwen3_moe")
HF_SEQ = 16


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


MODELS: dict[str, Any] = {"mlp": MLP, **{m: (lambda m=m: CausalLM(m)) for m in HF_MODELS}}


def seq_of(model_name: str) -> int | None:
    """The sequence length of a model's rows (None: the MLP takes feature vectors)."""
    return HF_SEQ if model_name in HF_MODELS else None


def global_batch(seed: int, samples: int, model=None):
    """The global batch: (B, 16) inputs and targets, or (B, S) token ids for a causal LM."""
    g = torch.Generator().manual_seed(seed + 17)
    if isinstance(model, CausalLM):
        vocab = int(model.config.vocab_size)
        ids = torch.randint(vocab, (samples, HF_SEQ), generator=g)
        return ids, ids
    x = torch.randn(samples, 16, generator=g)  # (B, 16)
    y = torch.randn(samples, 16, generator=g)  # (B, 16)
    return x, y


def loss(out, y):
    if out.dim() == 3:  # next-token cross entropy; every row has S - 1 targets, so shard
        # means average to the global mean
        logits = out[:, :-1].reshape(-1, out.shape[-1])
        return torch.nn.functional.cross_entropy(logits, y[:, 1:].reshape(-1))
    return (out - y).pow(2).mean()


def cast(x, dtype):
    return x.to(dtype) if x.is_floating_point() else x
