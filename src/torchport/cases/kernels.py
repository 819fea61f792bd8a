"""The ``kernels`` suite: a user's kernel (a replacement) evaluated inside the real model.

A ``Replacement`` names what it replaces (a module class, found by name in the model) and how to
make the replacement from one instance of it (same parameter names, so every gradient can be
compared by name). When it is a custom op, ``op`` and ``op_samples`` let the ladder check its
registration (``torch.library.opcheck``) and its gradients (``torch.autograd.gradcheck``).
``runner/kernels/ladder.py`` runs the checks, the OpInfo-like sample comparison, the whole-model
A/B (the reference runs the ORIGINAL module, never the replacement) and the timings.

To add one: a function returning a ``Replacement``; in a workload folder, mark it with
``@replacement`` and run ``torchport run --workload module:function`` (README, docs/kernels.md).

The built-in suite is four fused RMSNorm custom ops for transformers' ``LlamaRMSNorm`` in reduced
llama: one right, one whose fake kernel returns the wrong shape (opcheck fails), one with a wrong
backward (gradcheck fails), one right but slower than the module it replaces.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchport.cases.base import Case, Size, Workload

LLAMA_RMSNORM = "LlamaRMSNorm"
# dtypes the built-in ops claim; a replacement states its own
CLAIMED_DTYPES = ("float32", "float64", "bfloat16", "float16")
NAMESPACE = "torchport_kernels"
SCHEMA = "(Tensor x, Tensor weight, float eps) -> Tensor"


@dataclass(kw_only=True)
class Replacement:
    """A kernel to evaluate against what it replaces.

    name:        short name, part of the case id.
    target:      the class name (or ``module.Class`` path) of the modules it replaces.
    make:        ``make(original_module) -> replacement_module``; shares the original's
                 parameters under the same names.
    op:          the custom op (``torch.library.custom_op`` result or ``torch.ops.ns.name``),
                 checked with opcheck and gradcheck; None for a plain module replacement.
    op_samples:  ``op_samples(dtype, device) -> list of (args, kwargs)`` for opcheck/gradcheck.
    dtypes:      the dtypes the replacement claims, compared sample by sample.
    trains:      whether it has a backward (gradcheck, gradients compared).
    model:       ``model(seed, size) -> Workload``: the model to put it in (default reduced
                 llama from the hf suite).
    """

    name: str
    target: str
    make: Callable[[Any], Any]
    op: Any = None
    op_samples: Callable[[Any, str], list] | None = None
    dtypes: tuple[str, ...] = CLAIMED_DTYPES
    trains: bool = True
    model: Callable[..., Workload] | None = None
    notes: dict = field(default_factory=dict)

    def matches(self, module: Any) -> bool:
        cls = type(module)
        return self.target in (cls.__name__, f"{cls.__module__}.{cls.__qualname__}")


def replacement(fn: Callable[[], Replacement]) -> Callable[[], Replacement]:
    """Mark a workload-folder function that returns a ``Replacement``: ``torchport run
    --workload module:function`` then runs the kernel ladder on it."""
    fn.torchport_ladder = "kernel"  # type: ignore[attr-defined]
    return fn


def swap_modules(model: Any, rep: Replacement) -> list[str]:
    """Replace, in place, every submodule ``rep`` targets; return their qualified names."""
    swapped = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if rep.matches(child):
                setattr(module, child_name, rep.make(child))
                swapped.append(f"{name}.{child_name}" if name else child_name)
    return swapped


# -- the built-in fused RMSNorm ops ----------------------------------------------------------
def _compute_dtype(dtype):
    import torch

    return torch.promote_types(dtype, torch.float32)  # float32 inside, float64 stays float64


def _normalised(x, eps: float):
    """(y, rstd): x normalised over its last dim in the compute dtype; y in x's dtype."""
    import torch

    xf = x.to(_compute_dtype(x.dtype))
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * rstd), rstd


def _forward(x, weight, eps: float):
    y, _ = _normalised(x, eps)
    return weight * y.to(x.dtype)  # as LlamaRMSNorm: scale after casting back


def _forward_slow(x, weight, eps: float):
    """Right but slow: one row at a time."""
    import torch

    rows = x.reshape(-1, x.shape[-1])
    out = torch.stack([_normalised(row, eps)[0].to(x.dtype) for row in rows])
    return weight * out.reshape(x.shape)


def _backward(ctx, grad, *, wrong: bool = False):
    """d/dx of w * x * rstd: rstd * (g w - y mean(g w y)); d/dw = sum of g y."""
    x, weight = ctx.saved_tensors
    y, rstd = _normalised(x, ctx.eps)
    g = grad.to(y.dtype)
    gw = g * weight.to(y.dtype)
    if wrong:  # forgets that rstd depends on x
        dx = gw * rstd
    else:
        dx = rstd * (gw - y * (gw * y).mean(-1, keepdim=True))
    dw = (g * y.to(x.dtype).to(y.dtype)).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(weight.dtype).reshape(weight.shape), None


def _setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def rms_norm_autograd(op) -> None:
    """Give an RMSNorm custom op ``(x, weight, eps) -> y`` the RMSNorm backward (computed in
    float32, float64 kept): for a kernel that brings a forward of its own only."""
    op.register_autograd(_backward, setup_context=_setup)


@functools.cache
def builtin_ops() -> dict[str, Any]:
    """The four variants, registered once per process under ``torchport_kernels::``."""
    import torch

    ops: dict[str, Any] = {}
    for variant, impl, wrong_fake, wrong_backward in (
        ("rms_norm", _forward, False, False),
        ("rms_norm_bad_fake", _forward, True, False),
        ("rms_norm_bad_backward", _forward, False, True),
        ("rms_norm_slow", _forward_slow, False, False),
    ):
        op = torch.library.custom_op(f"{NAMESPACE}::{variant}", mutates_args=(), schema=SCHEMA)(
            impl
        )

        def fake(x, weight, eps, _wrong=wrong_fake, _rows=impl is _forward_slow):
            dtype = torch.promote_types(x.dtype, weight.dtype)
            if _wrong:  # the bad one drops the last dim
                return x.new_empty(x.shape[:-1], dtype=dtype)
            if _rows:  # stacked row by row: contiguous whatever x's layout
                return x.new_empty(x.shape, dtype=dtype)
            # element-wise on x: the output keeps x's layout (a transposed x, a transposed y),
            # as the real kernel's does; opcheck compares the strides
            return torch.empty_like(x, dtype=dtype)

        op.register_fake(fake)
        op.register_autograd(
            functools.partial(_backward, wrong=wrong_backward), setup_context=_setup
        )
        ops[variant] = op
    return ops


def fused_rms_norm_module(op):
    """``make`` for an RMSNorm op: a module holding the original's ``weight`` and epsilon."""
    import torch

    class FusedRMSNorm(torch.nn.Module):
        def __init__(self, original):
            super().__init__()
            self.weight = original.weight
            self.variance_epsilon = float(
                getattr(original, "variance_epsilon", getattr(original, "eps", 1e-6))
            )

        def forward(self, hidden_states):
            return op(hidden_states, self.weight, self.variance_epsilon)

    return FusedRMSNorm


def rms_norm_samples(dtype, device: str) -> list:
    """(args, kwargs) for opcheck/gradcheck: small, odd sizes, one non-contiguous."""
    import torch

    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device, dtype)

    big = rand(3, 5, 14)
    return [
        ((rand(3, 7), rand(7), 1e-6), {}),
        ((rand(2, 3, 5), rand(5), 1e-5), {}),
        ((big[..., ::2], rand(7), 1e-6), {}),  # non-contiguous last dim
    ]


def rms_norm_replacement(variant: str) -> Replacement:
    op = builtin_ops()[variant]
    return Replacement(
        name=variant,
        target=LLAMA_RMSNORM,
        make=fused_rms_norm_module(op),
        op=op,
        op_samples=rms_norm_samples,
    )


def reduced_llama(*, seed: int, size: Size) -> Workload:
    """The hf suite's reduced llama (random init, trains on random tokens)."""
    from torchport.cases.hf import HFCase

    return HFCase("llama").build(seed=seed, size=size)


class KernelCase(Case):
    """``kernels/<name>``: one replacement inside its model, run by the kernel ladder."""

    ladder = "kernel"
    tags: tuple[str, ...] = ("kernel",)

    def __init__(
        self,
        id: str,
        make_replacement: Callable[[], Replacement],
        *,
        version: int = 1,
        tags: tuple[str, ...] = (),
    ):
        self.id, self.version = id, version
        self.tags = ("kernel", *tags)
        self.make_replacement = make_replacement

    def replacement(self) -> Replacement:
        rep = self.make_replacement()
        if not isinstance(rep, Replacement):
            raise TypeError(
                f"{self.id}: the replacement function returned {type(rep).__name__}; it must "
                "return torchport.cases.kernels.Replacement"
            )
        return rep

    def build(self, *, seed: int, size: Size) -> Workload:
        """The model with the ORIGINAL modules (the ladder makes the replaced copy)."""
        rep = self.replacement()
        return (rep.model or reduced_llama)(seed=seed, size=size)


VARIANTS = ("rms_norm", "rms_norm_bad_fake", "rms_norm_bad_backward", "rms_norm_slow")


def kernels_suite() -> list[Case]:
    """Fused RMSNorm custom ops in reduced llama: right, bad fake, bad backward, slow."""
    return [
        KernelCase(
            f"kernels/{variant}",
            functools.partial(rms_norm_replacement, variant),
            tags=("rms_norm", "llama"),
        )
        for variant in VARIANTS
    ]
