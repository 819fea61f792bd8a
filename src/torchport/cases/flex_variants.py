"""FlexAttention variants: each one ``mask_mod`` and/or ``score_mod``, defined once.

A variant is written as functions of broadcastable index tensors (b, h, q_idx, kv_idx), the way
FlexAttention calls them. The same functions serve twice: FlexAttention compiles them into its
kernel, and the float64 reference (flex.py, ``impl="explicit"``) applies them to full index
grids of shape (B, H, Q, KV) around an explicit softmax, with no FlexAttention involved. Whether
a function says what its name promises is checked against hand-written masks in
tests/cases/test_flex.py.

To add one: write ``_name(spec) -> Mods`` below and list it in ``VARIANTS``. Tensors a variant
captures (document ids, bias tables) go in ``Mods.tensors``: the model keeps them as parameters
(learnable: they get gradients) or buffers, so they move and cast with the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

BLOCK = 128  # FlexAttention's default block size; the full-blocks variant is built on it


@dataclass(frozen=True, kw_only=True)
class Spec:
    """The sizes a variant is built for, and its own knobs (defaults sized for seq ~256)."""

    batch: int
    heads: int
    seq: int
    window: int = 64  # sliding window / dilated span / NATTEN image width source
    dilation: int = 2
    globals_: int = 8  # global tokens (global + sliding)
    radius: int = 3  # NATTEN neighbourhood radius (7 x 7 kernel)
    cap: float = 20.0  # tanh soft-cap
    block: int = BLOCK

    def __post_init__(self):
        if min(self.batch, self.heads, self.seq, self.window, self.dilation, self.block) <= 0:
            raise ValueError(f"variant sizes must be positive: {self}")
        if self.globals_ < 0 or self.radius < 0 or self.cap <= 0:
            raise ValueError(f"globals_ and radius must be >= 0 and cap > 0: {self}")


@dataclass(kw_only=True)
class Mods:
    """What a variant contributes. Functions receive captured tensors by name as ``t``."""

    mask_mod: Callable | None = None  # (t, b, h, q, kv) -> bool
    score_mod: Callable | None = None  # (t, score, b, h, q, kv) -> score
    tensors: dict = field(default_factory=dict)  # name -> tensor (float32 or integer)
    learnable: tuple[str, ...] = ()  # which of ``tensors`` are parameters
    mask_depends_on_batch: bool = False  # the block mask needs B (else broadcast over B)
    full_blocks_only: bool = False  # block mask built from full blocks (from_kv_blocks)
    sdpa: dict | None = None  # keyword arguments of an equivalent SDPA call


def _causal(t, b, h, q, kv):
    return q >= kv


def _noop(spec: Spec) -> Mods:
    return Mods(sdpa={})


def _causal_variant(spec: Spec) -> Mods:
    return Mods(mask_mod=_causal, sdpa={"is_causal": True})


def _sliding_window(spec: Spec) -> Mods:
    window = spec.window

    def mask(t, b, h, q, kv):  # causal, at most ``window`` tokens back, self included
        return (q >= kv) & (q - kv < window)

    return Mods(mask_mod=mask)


def _prefix_lm(spec: Spec) -> Mods:
    prefix = spec.seq // 4

    def mask(t, b, h, q, kv):  # the prefix is seen by everyone (bidirectional), then causal
        return (kv < prefix) | (q >= kv)

    return Mods(mask_mod=mask)


def document_ids(batch: int, seq: int):
    """Packed sequences: each row cut into documents of deterministic, uneven lengths."""
    import torch

    ids = torch.zeros(batch, seq, dtype=torch.int64)
    for row in range(batch):
        start, doc = 0, 0
        while start < seq:  # lengths base, base + 13, base + 26, ...: documents cross blocks
            length = max(1, seq // 6) + 5 * row + 13 * doc
            ids[row, start : start + length] = doc
            start, doc = start + length, doc + 1
    return ids


def _document(spec: Spec) -> Mods:
    def mask(t, b, h, q, kv):  # causal within one's own document
        doc = t["doc_ids"]
        return (doc[b, q] == doc[b, kv]) & (q >= kv)

    return Mods(
        mask_mod=mask,
        tensors={"doc_ids": document_ids(spec.batch, spec.seq)},
        mask_depends_on_batch=True,
    )


def alibi_slopes(heads: int):
    """ALiBi's geometric slopes 2^(-8 (h+1) / H): powers of two, exact in every dtype."""
    import torch

    return torch.exp2(-8.0 * torch.arange(1, heads + 1, dtype=torch.float64) / heads).float()


def _alibi(spec: Spec) -> Mods:
    def score(t, s, b, h, q, kv):  # linear penalty with distance, one slope per head
        return s + t["alibi_slopes"][h] * (kv - q)

    return Mods(
        mask_mod=_causal, score_mod=score, tensors={"alibi_slopes": alibi_slopes(spec.heads)}
    )


def _softcap(spec: Spec) -> Mods:
    import torch

    cap = spec.cap

    def score(t, s, b, h, q, kv):  # Gemma-2 style: scores squashed into (-cap, cap)
        return cap * torch.tanh(s / cap)

    return Mods(mask_mod=_causal, score_mod=score)


def _rel_bias(spec: Spec) -> Mods:
    import torch

    offset = spec.seq - 1
    table = torch.randn(spec.heads, 2 * spec.seq - 1) * 0.5  # (H, 2S-1), learnable

    def score(t, s, b, h, q, kv):  # T5-style learned bias by relative position, per head
        return s + t["rel_bias"][h, kv - q + offset]

    return Mods(score_mod=score, tensors={"rel_bias": table}, learnable=("rel_bias",))


def _head_bias(spec: Spec) -> Mods:
    import torch

    table = torch.randn(spec.heads, spec.seq) * 0.5  # (H, KV), learnable

    def score(t, s, b, h, q, kv):  # each head its own learned bias over key positions
        return s + t["head_bias"][h, kv]

    return Mods(score_mod=score, tensors={"head_bias": table}, learnable=("head_bias",))


def image_width(seq: int) -> int:
    """Width of the image a sequence of ``seq`` tokens is read as (row-major, last row may be
    short): the smallest width w >= sqrt(seq)."""
    import math

    return max(1, math.isqrt(seq - 1) + 1) if seq > 1 else 1


def _natten2d(spec: Spec) -> Mods:
    width, radius = image_width(spec.seq), spec.radius

    def mask(t, b, h, q, kv):  # 2-D neighbourhood: within ``radius`` rows and columns
        dr = q // width - kv // width
        dc = q % width - kv % width
        return (dr.abs() <= radius) & (dc.abs() <= radius)

    return Mods(mask_mod=mask)


def _global_sliding(spec: Spec) -> Mods:
    window, globals_ = spec.window, spec.globals_

    def mask(t, b, h, q, kv):  # Longformer: a bidirectional band, plus global first tokens
        return ((q - kv).abs() < window) | (q < globals_) | (kv < globals_)

    return Mods(mask_mod=mask)


def _dilated_sliding(spec: Spec) -> Mods:
    window, dilation = spec.window, spec.dilation

    def mask(t, b, h, q, kv):  # causal, every ``dilation``-th token within the span
        back = q - kv
        return (back >= 0) & (back < window * dilation) & (back % dilation == 0)

    return Mods(mask_mod=mask)


def _block_full(spec: Spec) -> Mods:
    block = spec.block

    def mask(t, b, h, q, kv):  # block-causal: whole blocks of ``block`` tokens, no partials
        return q // block >= kv // block

    return Mods(mask_mod=mask, full_blocks_only=True)


# name -> (builder, tags). The name is the family the summary groups by.
VARIANTS: dict[str, tuple[Callable[[Spec], Mods], tuple[str, ...]]] = {
    "noop": (_noop, ("baseline",)),
    "causal": (_causal_variant, ("mask_mod",)),
    "sliding_window": (_sliding_window, ("mask_mod",)),
    "prefix_lm": (_prefix_lm, ("mask_mod",)),
    "document": (_document, ("mask_mod", "captured_tensor")),
    "alibi": (_alibi, ("mask_mod", "score_mod", "captured_tensor")),
    "softcap": (_softcap, ("mask_mod", "score_mod")),
    "rel_bias": (_rel_bias, ("score_mod", "learnable_bias")),
    "head_bias": (_head_bias, ("score_mod", "learnable_bias")),
    "natten2d": (_natten2d, ("mask_mod",)),
    "global_sliding": (_global_sliding, ("mask_mod",)),
    "dilated_sliding": (_dilated_sliding, ("mask_mod",)),
    "block_full": (_block_full, ("mask_mod", "full_blocks")),
}


def build_mods(name: str, spec: Spec) -> Mods:
    return VARIANTS[name][0](spec)
