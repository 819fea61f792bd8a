"""A team's own fused RMSNorm, evaluated by torchport inside reduced llama.

    cd docs/examples/kernel_workload
    torchport run --workload my_rmsnorm:fused_rmsnorm --device cpu --modes eager

The op is a ``torch.library.custom_op`` (Python here; a C++, Triton or vendor-language kernel
registers the same way). torchport checks its registration (opcheck) and its gradients
(gradcheck, float64) on variants of the samples below (non-contiguous, transposed, sliced,
expanded, odd sizes), compares it and transformers' LlamaRMSNorm with the float64 truth on
samples of what the model gives it, runs the whole model with it against the model with the
original, and times both.
"""

import torch

from torchport.cases.kernels import Replacement, replacement


@torch.library.custom_op("my_team::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * y.to(x.dtype)


@rms_norm.register_fake
def _(x, weight, eps):
    # element-wise on x: the real output keeps x's layout (strides), and so must the fake one
    # (torchport's opcheck runs on transposed and sliced copies of the samples too)
    return torch.empty_like(x, dtype=torch.promote_types(x.dtype, weight.dtype))


def _setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _backward(ctx, grad):
    x, weight = ctx.saved_tensors
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + ctx.eps)
    y = xf * rstd
    gw = grad.to(compute) * weight.to(compute)
    dx = rstd * (gw - y * (gw * y).mean(-1, keepdim=True))
    dw = (grad.to(compute) * y).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(weight.dtype), None


rms_norm.register_autograd(_backward, setup_context=_setup)


class MyRMSNorm(torch.nn.Module):
    """Replaces LlamaRMSNorm: keeps its ``weight`` (same parameter name) and epsilon."""

    def __init__(self, original):
        super().__init__()
        self.weight = original.weight
        self.eps = float(original.variance_epsilon)

    def forward(self, hidden_states):
        return rms_norm(hidden_states, self.weight, self.eps)


def _samples(dtype, device):
    """(args, kwargs) for opcheck and gradcheck."""
    x = torch.randn(3, 5, 8, dtype=dtype, device=device)
    w = torch.randn(8, dtype=dtype, device=device)
    return [((x, w, 1e-6), {}), ((x[:, 1:, :], w, 1e-5), {})]


@replacement
def fused_rmsnorm():
    return Replacement(
        name="my_rms_norm",
        target="LlamaRMSNorm",  # transformers' class, found in the model by name
        make=MyRMSNorm,
        op=rms_norm,
        op_samples=_samples,
        dtypes=("float32", "float64", "bfloat16"),
    )
