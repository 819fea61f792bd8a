"""Suite ``smoke``: six small cases that exercise every stage in seconds."""

from __future__ import annotations

from torchport.cases.base import Case, FunctionCase, Size, Workload


def _mlp(*, seed: int, size: Size) -> Workload:
    import torch
    from torch import nn

    torch.manual_seed(seed)
    batch, width = size.batch or (64 if size.perf else 8), 256 if size.perf else 32
    model = nn.Sequential(
        nn.Linear(width, 4 * width), nn.GELU(), nn.LayerNorm(4 * width), nn.Linear(4 * width, width)
    )
    x = torch.randn(batch, width)  # (B, width)
    target = torch.randn(batch, width)
    return Workload(
        model=model,
        args=(x,),
        samples=batch,
        loss_fn=lambda out: nn.functional.mse_loss(out, target.to(out.device, out.dtype)),
    )


def _convnet(*, seed: int, size: Size) -> Workload:
    import torch
    from torch import nn

    torch.manual_seed(seed)
    batch, side = size.batch or (32 if size.perf else 4), 32 if size.perf else 16
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.GroupNorm(4, 16),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    x = torch.randn(batch, 3, side, side)  # (B, C, H, W)
    labels = torch.randint(0, 10, (batch,))
    return Workload(
        model=model,
        args=(x,),
        samples=batch,
        loss_fn=lambda out: nn.functional.cross_entropy(out, labels.to(out.device)),
    )


def _bnnet(*, seed: int, size: Size) -> Workload:
    """A conv net with BatchNorm and dropout: what training mode changes (batch statistics,
    running-stat updates, dropout masks)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    batch, side = size.batch or (32 if size.perf else 8), 32 if size.perf else 16
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.SiLU(),
        nn.Dropout2d(0.1),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.BatchNorm2d(32),
        nn.SiLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.2),
        nn.Linear(32, 10),
    )
    x = torch.randn(batch, 3, side, side)  # (B, C, H, W)
    labels = torch.randint(0, 10, (batch,))
    return Workload(
        model=model,
        args=(x,),
        samples=batch,
        loss_fn=lambda out: nn.functional.cross_entropy(out, labels.to(out.device)),
    )


def smoke_suite() -> list[Case]:
    """Tiny MLP, tiny conv nets (one with BatchNorm and dropout) and reduced llama, gpt2,
    qwen3_moe: every stage in seconds."""
    from torchport.cases.hf import HFCase

    return [
        FunctionCase("smoke/mlp", _mlp, tags=("dense",)),
        FunctionCase("smoke/convnet", _convnet, tags=("conv",)),
        FunctionCase("smoke/bnnet", _bnnet, tags=("conv", "batchnorm", "dropout")),
        HFCase("llama"),
        HFCase("gpt2"),
        HFCase("qwen3_moe"),
    ]
