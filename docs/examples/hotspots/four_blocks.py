"""A model of four identical blocks, for the hot-spot self-check (docs/probes/hotspots.md).

    cd docs/examples/hotspots
    torchport run --workload four_blocks:make --device cpu --modes eager --probes hotspots

A stem projects the input first, so every block's input needs a gradient and the four blocks
make the same calls in the backward too: their shares of the step must agree.
"""

import torch
from torch import nn


class Block(nn.Module):
    """Pre-norm MLP block with a residual: (rows, dim) -> (rows, dim)."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class FourBlocks(nn.Module):
    def __init__(self, features: int = 32, dim: int = 128, classes: int = 10):
        super().__init__()
        self.stem = nn.Linear(features, dim)
        self.blocks = nn.Sequential(*(Block(dim) for _ in range(4)))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def make(batch: int = 256):
    model = FourBlocks()
    x = torch.randn(batch, 32)
    return {"model": model, "inputs": x, "loss_fn": lambda out: out.square().mean()}
