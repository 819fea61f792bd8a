"""The float64 reference of a dist training case: one process trains on the global batch.

k SGD steps of a ``cases/dist_models`` model on the CPU in float64, on the whole global batch
that the ranks of a strategy share out. It depends on the model, seed, global batch and number
of steps, not on the strategy nor the device: DDP, FSDP2 and tensor parallel of one model
share it. ``execution/reference.py`` computes it in its clean child (backend autoload off,
docs/design.md rule 8) and caches it on disk (task ``dist_train``); the ranks read the cache file.
"""

from __future__ import annotations

import torch

from torchport.cases import dist_models


def train_history(
    model_name: str, seed: int, samples: int, steps: int, *, lr: float = dist_models.LR
) -> list[dict]:
    """Per step: the loss and every parameter after the step (float64, CPU)."""
    torch.manual_seed(seed)
    model = dist_models.MODELS[model_name]().double()  # the ranks' float32 init, widened
    x, y = dist_models.global_batch(seed, samples, model)
    x, y = dist_models.cast(x, torch.float64), dist_models.cast(y, torch.float64)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss = dist_models.loss(model(x), y)
        loss.backward()
        opt.step()
        history.append(
            {
                "loss": float(loss.detach()),
                "params": {n: p.detach().clone() for n, p in model.named_parameters()},
            }
        )
    return history
