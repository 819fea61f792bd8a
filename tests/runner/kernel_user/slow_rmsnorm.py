"""A team's fused RMSNorm that is right but slow: one row at a time, its weight applied in
float32 before the one rounding to the input's dtype (LlamaRMSNorm rounds twice: after
normalising, and after scaling). In float16 with weights that are not 1, its answers and
LlamaRMSNorm's differ from each other by more than float16's tolerance (hidden states of an
embedding's size: rstd ~100 magnifies the rounding of the input's gradient), while both are as
close to the float64 truth: a correct kernel, to be passed with its slowdown shown.

    torchport run --workload slow_rmsnorm:slow_rmsnorm --device cpu --modes eager
"""

import torch

from torchport.cases.base import Workload
from torchport.cases.kernels import Replacement, replacement


class Norm(torch.nn.Module):
    """The team's model norm: LlamaRMSNorm's arithmetic (float32 inside, scaled after)."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)


def model(*, seed, size):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(32, 64, bias=False),
        Norm(64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 64),
        Norm(64),
    )
    with torch.no_grad():
        for m in net:
            if isinstance(m, Norm):
                m.weight.uniform_(0.3, 3.0)  # trained norms are not 1
    x = torch.randn(4, 16, 32) * 0.05  # hidden states of an embedding's size
    return Workload(model=net, args=(x,), loss_fn=lambda out: out.pow(2).mean())


@torch.library.custom_op("user_slow::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    rows = x.reshape(-1, x.shape[-1]).to(torch.float32)
    w = weight.to(torch.float32)
    out = torch.stack([w * (r * torch.rsqrt(r.pow(2).mean() + eps)) for r in rows])
    return out.to(x.dtype).reshape(x.shape)


@rms_norm.register_fake
def _(x, weight, eps):
    return x.new_empty(x.shape)  # stacked rows: contiguous


def _setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _backward(ctx, grad):
    x, weight = ctx.saved_tensors
    xf, g, w = x.to(torch.float32), grad.to(torch.float32), weight.to(torch.float32)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + ctx.eps)
    y = xf * rstd
    gw = g * w
    dx = rstd * (gw - y * (gw * y).mean(-1, keepdim=True))
    dw = (g * y).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(weight.dtype), None


rms_norm.register_autograd(_backward, setup_context=_setup)


class SlowNorm(torch.nn.Module):
    def __init__(self, original):
        super().__init__()
        self.weight = original.weight
        self.eps = float(original.variance_epsilon)

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def _samples(dtype, device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 8, generator=g, dtype=torch.float64).to(device, dtype)
    w = (torch.rand(8, generator=g, dtype=torch.float64) * 2.7 + 0.3).to(device, dtype)
    return [((x, w, 1e-6), {}), ((x.reshape(2, 12)[:, :8], w, 1e-5), {})]


@replacement
def slow_rmsnorm():
    return Replacement(
        name="slow_rms_norm",
        target="Norm",
        make=SlowNorm,
        op=rms_norm,
        op_samples=_samples,
        dtypes=("float32", "float16"),
        model=model,
    )
