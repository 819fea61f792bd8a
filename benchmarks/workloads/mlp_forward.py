"""A forward-only MLP, 4 x 2048 (``--workload mlp_forward:make`` from this folder).

Inference only, so it runs on backends that cannot train through torch autograd (torchax).
"""

import torch
from torch import nn


def make(batch: int = 4):
    model = nn.Sequential(nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 2048))
    return {"model": model, "inputs": (torch.randn(batch, 2048),)}
