"""A workload for docs/verdicts.md: noise that eval mode does not switch off (``torch.randn``
drawn whatever ``self.training`` says) and a custom op called as ``torch.ops.docs.cube``.

    cd docs/examples/no_tool_verdicts
    torchport run --workload noisy_cube:make --device cpu --modes eager,compile --probes perf
    torchport run --workload noisy_cube:make_wrong --device cpu --modes eager --probes none
"""

import torch


@torch.library.custom_op("docs::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


@torch.library.custom_op("docs::cube_wrong", mutates_args=())
def cube_wrong(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


def _save(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return 3 * x * x * grad


def _wrong_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return 2 * x * x * grad  # d(x^3)/dx is 3x^2


@cube.register_fake
def _(x):  # what torch.compile traces with: the shape and dtype of the result
    return torch.empty_like(x)


@cube_wrong.register_fake
def _(x):
    return torch.empty_like(x)


cube.register_autograd(_backward, setup_context=_save)
cube_wrong.register_autograd(_wrong_backward, setup_context=_save)


class NoisyCube(torch.nn.Module):
    def __init__(self, wrong: bool = False):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)
        self.wrong = wrong

    def forward(self, x):
        h = self.a(x)
        h = h + 0.1 * torch.randn(h.shape, dtype=h.dtype, device=h.device)  # ignores training
        h = torch.ops.docs.cube_wrong(h) if self.wrong else torch.ops.docs.cube(h)
        return self.b(h)


def make():
    return {
        "model": NoisyCube(),
        "inputs": (torch.randn(4, 16),),
        "loss_fn": lambda out: out.pow(2).mean(),
    }


def make_wrong():
    return {**make(), "model": NoisyCube(wrong=True)}
