"""Variants of a user's own samples: the layouts and sizes a kernel gets wrong.

A sample is what the user's ``op_samples`` gave (``(args, kwargs)``), or what the model gave
the first replaced module (its positional AND keyword arguments: transformers calls attention
by keyword). A ``Variant`` keeps each floating tensor of it as a float64 CPU *base* (the leaf
gradients flow back to) and a *view* that makes the layout under test from the base:

as_given         the sample itself
non_contiguous   every other element of a tensor twice as wide in its last dim
transposed       the last two dims stored transposed (same shape, column-major)
sliced           rows 2..n+1 of a taller tensor (a storage offset)
expanded         row 0 broadcast over the first dim (stride 0)
one_row, odd_rows   the first dim (shared by the sample's tensors of 2+ dims) cut to 1 row, or
                 grown to 2n+1 rows (rows repeated): block sizes a kernel assumes

Every variant keeps the shapes the op relates (a weight stays the width of its input), so it is
an input the original takes; one the op's float64 CPU implementation refuses is left out and
said so by the caller. Values in the gaps a view skips differ from the sample's (``_filler``):
a kernel that reads them gives a wrong answer, not a lucky one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _same(t):
    return t


def _filler(t):
    return t + 1.0


def _non_contiguous(t):
    if t.dim() == 0 or t.shape[-1] == 0:
        return None
    import torch

    base = torch.stack([t, _filler(t)], -1).reshape(*t.shape[:-1], 2 * t.shape[-1])
    return base, lambda b: b[..., ::2]


def _transposed(t):
    if t.dim() < 2 or t.shape[-1] == t.shape[-2] == 1:
        return None
    return t.transpose(-1, -2).contiguous(), lambda b: b.transpose(-1, -2)


def _sliced(t):
    if t.dim() == 0 or t.shape[0] == 0:
        return None
    import torch

    n = t.shape[0]
    pad = _filler(t[:1])
    base = torch.cat([pad, pad, t, pad], 0)
    return base, lambda b: b[2 : 2 + n]


def _expanded(t):
    if t.dim() == 0 or t.shape[0] < 2:
        return None
    shape = tuple(t.shape)
    return t[:1].clone(), lambda b: b.expand(shape)


LAYOUTS: tuple[tuple[str, Callable], ...] = (
    ("non_contiguous", _non_contiguous),
    ("transposed", _transposed),
    ("sliced", _sliced),
    ("expanded", _expanded),
)


@dataclass
class Variant:
    """One sample in one layout: ``call_args(leaves)`` puts ``view(leaf)`` of each base's leaf
    back where the sample had the tensor."""

    name: str
    sample: int  # index of the user's sample it came from
    flat: list  # the sample's leaves (pytree), non-tensor values as given
    spec: Any
    slots: list[int]  # positions in ``flat`` of the floating tensors
    bases: list  # float64 CPU tensors, one per slot
    views: list[Callable]

    @property
    def label(self) -> str:
        return f"sample {self.sample} {self.name}"

    def leaves(self, dtype, device, *, grad: bool = False) -> list:
        """The bases at ``dtype`` on ``device`` (rounded on the CPU first: a float64 value
        never reaches a device that is given another dtype)."""
        return [b.to(dtype).to(device, copy=True).requires_grad_(grad) for b in self.bases]

    def call_args(self, leaves, *, contiguous: bool = False) -> tuple[tuple, dict]:
        """(args, kwargs) with the views of ``leaves``; other tensors moved beside them."""
        import torch
        from torch.utils._pytree import tree_unflatten

        device = leaves[0].device if leaves else None
        flat = [
            v.to(device) if isinstance(v, torch.Tensor) and device is not None else v
            for v in self.flat
        ]
        for slot, leaf, view in zip(self.slots, leaves, self.views, strict=True):
            made = view(leaf)
            flat[slot] = made.contiguous() if contiguous else made
        args, kwargs = tree_unflatten(flat, self.spec)
        return tuple(args), dict(kwargs)


def variants(args, kwargs, sample: int = 0, *, sizes: bool = True) -> list[Variant]:
    """The sample as given and in every layout (and size, where ``sizes``) that applies."""
    import torch
    from torch.utils._pytree import tree_flatten

    flat, spec = tree_flatten((list(args), dict(kwargs or {})))
    flat = [v.detach() if isinstance(v, torch.Tensor) else v for v in flat]
    slots = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor) and v.is_floating_point()]
    # to the host first, then float64 there: a device need not compute float64
    values = [flat[i].to("cpu").to(torch.float64) for i in slots]

    def variant(name, bases, views):
        return Variant(name, sample, flat, spec, slots, bases, views)

    found = [variant("as_given", values, [_same] * len(values))]
    for name, make in LAYOUTS:
        made = [make(v) for v in values]
        if all(m is None for m in made):
            continue
        found.append(
            variant(
                name,
                [m[0] if m else v for m, v in zip(made, values, strict=True)],
                [m[1] if m else _same for m in made],
            )
        )
    lead = next((v.shape[0] for v in values if v.dim() >= 2), None)
    if sizes and lead:
        for name, rows in (("one_row", 1), ("odd_rows", 2 * lead + 1)):
            if rows == lead:
                continue
            index = torch.arange(rows) % lead
            bases = [v[index] if v.dim() >= 2 and v.shape[0] == lead else v for v in values]
            found.append(variant(name, bases, [_same] * len(values)))
    return found


def from_module_input(x) -> list[Variant]:
    """A single-tensor module input (..., features): the layouts, then sizes with fresh values
    of x's mean and spread keeping the last dim (odd rows, one row, 3-D, leading ones)."""
    import torch

    found = variants((x,), {}, sizes=False)
    gen = torch.Generator().manual_seed(1234)
    feat = x.shape[-1]
    host = x.detach().to("cpu").double()  # never float64 on the device
    mean = float(host.mean()) if host.numel() else 0.0
    std = float(host.std()) if host.numel() > 1 else 1.0
    std = std if std == std and std > 0 else 1.0  # NaN or 0: unit spread
    base = found[0]
    for name, shape in (
        ("odd_rows", (7, feat)),
        ("one_row", (1, feat)),
        ("odd_3d", (3, 5, feat)),
        ("leading_ones", (1, 1, feat)),
    ):
        values = torch.randn(*shape, generator=gen, dtype=torch.float64) * std + mean
        found.append(Variant(name, 0, base.flat, base.spec, base.slots, [values], [_same]))
    return found
