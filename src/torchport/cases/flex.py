"""Suite ``flex``: attention variants through FlexAttention, forward and forward+backward.

Case id ``flex/<variant>/<shape>/<direction>``, e.g. ``flex/sliding_window/b2h4s256d64/fwd``.
The variant is the family the summary groups by (views/flex.py); the dtype is the run's
(``--dtype``), as for every suite, so one id names the same computation in every dtype.

Each case is one attention call: compiled by the ladder in compile mode (with the run's
``--compile-timeout``), eager in eager mode. Parity is against a float64 computation with no
FlexAttention in it (``Workload.reference_model``); SDPA, where an equivalent call exists, is
compared and timed by the ``flex`` and ``perf`` probes (``Workload.alternatives``). A backward
the device cannot run (the CPU in torch 2.13) is a ``skip`` whose reason is torch's own error.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchport.cases.base import Case, Size, Workload
from torchport.cases.flex_variants import VARIANTS

DIRECTIONS = ("fwd", "fwdbwd")


@dataclass(frozen=True, kw_only=True)
class Shape:
    batch: int
    heads: int
    kv_heads: int
    seq: int
    head_dim: int

    def __post_init__(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} not a multiple of kv heads {self.kv_heads}")

    @property
    def name(self) -> str:
        kv = f"kv{self.kv_heads}" if self.kv_heads != self.heads else ""
        return f"b{self.batch}h{self.heads}{kv}s{self.seq}d{self.head_dim}"


# Small enough for the CPU (the float64 reference holds B*H*S*S scores), and between them:
# multi-head and grouped-query, a sequence on and off the 128 block, head dims 64 and 128.
SHAPES = (
    Shape(batch=2, heads=4, kv_heads=4, seq=256, head_dim=64),
    Shape(batch=1, heads=8, kv_heads=2, seq=200, head_dim=128),
)


class FlexCase(Case):
    version = 1

    def __init__(self, variant: str, shape: Shape, direction: str):
        if variant not in VARIANTS or direction not in DIRECTIONS:
            raise ValueError(f"unknown flex variant/direction {variant}/{direction}")
        self.variant, self.shape, self.direction = variant, shape, direction
        self.id = f"flex/{variant}/{shape.name}/{direction}"
        gqa = ("gqa",) if shape.kv_heads != shape.heads else ()
        self.tags = (variant,) + VARIANTS[variant][1] + gqa + (direction,)

    def skip_reason_for(self, *, mode: str, device: str) -> str | None:
        if self.direction == "fwdbwd":
            from torchport.cases.flex_model import backward_unsupported

            return backward_unsupported(device)
        return None

    def build(self, *, seed: int, size: Size) -> Workload:
        return build_workload(
            self.variant, self.shape, trains=self.direction == "fwdbwd", seed=seed, size=size
        )


def build_workload(variant: str, shape: Shape, *, trains: bool, seed: int, size: Size) -> Workload:
    import torch

    from torchport.cases.flex_model import FlexAttentionModule
    from torchport.cases.flex_variants import Spec, build_mods

    torch.manual_seed(seed)
    # The perf size is the parity size: a second, larger compile per case would double the
    # suite's compile time (FlexAttention compiles take seconds each on the CPU) while the
    # same size compiles from the cache. --batch and --seq set both (e.g. 4 and 2048 on a GPU).
    batch, seq = size.batch or shape.batch, size.seq or shape.seq
    spec = Spec(batch=batch, heads=shape.heads, seq=seq)
    q = torch.randn(batch, shape.heads, seq, shape.head_dim)
    k, v = (torch.randn(batch, shape.kv_heads, seq, shape.head_dim) for _ in range(2))
    mods = build_mods(variant, spec)

    def module(impl: str):
        return FlexAttentionModule(q=q, k=k, v=v, mods=mods, spec=spec, impl=impl, trains=trains)

    alternatives = {"sdpa": module("sdpa")} if mods.sdpa is not None else {}
    meta = {
        "flex": {
            "variant": variant,
            "shape": shape.name,
            "batch": batch,
            "heads": shape.heads,
            "kv_heads": shape.kv_heads,
            "seq": seq,
            "head_dim": shape.head_dim,
            "trains": trains,
            "block_size": spec.block,
            "sdpa": mods.sdpa,
        }
    }
    # No ``tokens``: q, k and v are this model's parameters, and a 6*N*T FLOP estimate over
    # them would be meaningless; samples per second stay.
    return Workload(
        model=module("flex"),
        reference_model=module("explicit"),
        alternatives=alternatives,
        samples=batch,
        meta=meta,
        loss_fn=(lambda out: out.pow(2).mean()) if trains else None,
    )


def flex_suite() -> list[Case]:
    """FlexAttention variants x shapes x forward / forward+backward, compiled and eager."""
    return [
        FlexCase(variant, shape, direction)
        for variant in VARIANTS
        for shape in SHAPES
        for direction in DIRECTIONS
    ]
