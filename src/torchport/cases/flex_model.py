"""The module behind every ``flex`` case: one attention call, three ways to compute it.

impl="flex"      FlexAttention with the variant's score_mod and block mask (what is tested)
impl="explicit"  explicit scores, score_mod and mask on full index grids, softmax, @ v: the
                 float64 reference, with no FlexAttention in it
impl="sdpa"      scaled_dot_product_attention, for the variants that have an equivalent call

q, k and v are parameters (B, H|Hkv, S, D), so a forward+backward case compares their
gradients; learnable bias tables are parameters too, other captured tensors buffers.
Imported only when a case is built: it imports torch.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from torchport.cases.flex_variants import Mods, Spec


class FlexAttentionModule(nn.Module):
    def __init__(self, *, q, k, v, mods: Mods, spec: Spec, impl: str, trains: bool):
        super().__init__()
        if impl not in ("flex", "explicit", "sdpa"):
            raise ValueError(f"unknown impl '{impl}'")
        if impl == "sdpa" and mods.sdpa is None:
            raise ValueError("this variant has no equivalent SDPA call")
        self.mods, self.spec, self.impl = mods, spec, impl
        self.q = nn.Parameter(q.clone(), requires_grad=trains)  # (B, H, S, D)
        self.k = nn.Parameter(k.clone(), requires_grad=trains)  # (B, Hkv, S, D)
        self.v = nn.Parameter(v.clone(), requires_grad=trains)  # (B, Hkv, S, D)
        for name, tensor in mods.tensors.items():
            if name in mods.learnable:
                self.register_parameter(name, nn.Parameter(tensor.clone(), requires_grad=trains))
            else:
                self.register_buffer(name, tensor.clone())
        self._block_mask = None  # built on first use on the module's device (flex only)

    @property
    def gqa(self) -> bool:
        return self.k.shape[1] != self.q.shape[1]

    def captured(self) -> dict:
        return {name: getattr(self, name) for name in self.mods.tensors}

    def _apply(self, fn, recurse=True):
        self._block_mask = None  # moved or cast: the mask is rebuilt where the module now is
        return super()._apply(fn, recurse)

    def forward(self):
        if self.impl == "flex":
            return self._flex()
        if self.impl == "sdpa":
            return nn.functional.scaled_dot_product_attention(
                self.q, self.k, self.v, enable_gqa=self.gqa, **self.mods.sdpa
            )
        return self._explicit()

    # -- FlexAttention ---------------------------------------------------------------
    def _flex(self):
        from torch.nn.attention.flex_attention import flex_attention

        if not torch.compiler.is_compiling():
            refuse_modes_without_a_flex_rule()
        if self._block_mask is None and self.mods.mask_mod is not None:
            self._block_mask = build_block_mask_outside_graph(self)
        score_mod = None
        if self.mods.score_mod is not None:
            captured, mod = self.captured(), self.mods.score_mod

            def score_mod(score, b, h, q_idx, kv_idx):
                return mod(captured, score, b, h, q_idx, kv_idx)

        return flex_attention(
            self.q,
            self.k,
            self.v,
            score_mod=score_mod,
            block_mask=self._block_mask,
            enable_gqa=self.gqa,
        )

    def build_block_mask(self):
        """The variant's BlockMask on this module's device (None without a mask_mod)."""
        from torch.nn.attention.flex_attention import BlockMask, create_block_mask

        if self.mods.mask_mod is None:
            return None
        captured, mod, spec = self.captured(), self.mods.mask_mod, self.spec
        seq, device = self.q.shape[2], self.q.device

        def mask_mod(b, h, q_idx, kv_idx):
            return mod(captured, b, h, q_idx, kv_idx)

        if not self.mods.full_blocks_only:
            batch = self.q.shape[0] if self.mods.mask_depends_on_batch else None
            return create_block_mask(
                mask_mod, batch, None, seq, seq, device=device, BLOCK_SIZE=spec.block
            )
        # Block-causal built by hand: every listed block is full (no mask_mod evaluated
        # inside it), none partial. Shapes (1, 1, n) and (1, 1, n, n), n blocks per side.
        n = math.ceil(seq / spec.block)
        rows = torch.arange(n, device=device, dtype=torch.int32)
        full_num = (rows + 1).view(1, 1, n)
        full_idx = rows.view(1, 1, 1, n).expand(1, 1, n, n).contiguous()
        empty_num = torch.zeros(1, 1, n, device=device, dtype=torch.int32)
        empty_idx = torch.zeros(1, 1, n, n, device=device, dtype=torch.int32)
        return BlockMask.from_kv_blocks(
            empty_num,
            empty_idx,
            full_num,
            full_idx,
            BLOCK_SIZE=spec.block,
            mask_mod=mask_mod,
            seq_lengths=(seq, seq),
        )

    # -- the reference: no FlexAttention ------------------------------------------------
    def _explicit(self):
        q, k, v = self.q, self.k, self.v
        batch, heads, seq, dim = q.shape
        if self.gqa:  # query head h reads kv head h // (H / Hkv), as FlexAttention does
            k = k.repeat_interleave(heads // k.shape[1], dim=1)
            v = v.repeat_interleave(heads // v.shape[1], dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(dim)  # (B, H, Q, KV)
        b, h, q_idx, kv_idx = index_grids(batch, heads, seq, q.device)
        captured = self.captured()
        if self.mods.score_mod is not None:
            scores = self.mods.score_mod(captured, scores, b, h, q_idx, kv_idx)
        if self.mods.mask_mod is not None:
            allowed = self.mods.mask_mod(captured, b, h, q_idx, kv_idx)
            scores = scores.masked_fill(~allowed.expand_as(scores), float("-inf"))
        return torch.softmax(scores, dim=-1) @ v  # (B, H, Q, D)


def index_grids(batch: int, heads: int, seq: int, device):
    """b (B,1,1,1), h (1,H,1,1), q (1,1,S,1), kv (1,1,1,S): broadcast to (B, H, Q, KV)."""

    def arange(n):
        return torch.arange(n, device=device)

    return (
        arange(batch).view(-1, 1, 1, 1),
        arange(heads).view(1, -1, 1, 1),
        arange(seq).view(1, 1, -1, 1),
        arange(seq).view(1, 1, 1, -1),
    )


def refuse_modes_without_a_flex_rule() -> None:
    """Raise before eager FlexAttention meets a dispatch mode it has no rule for.

    Eager flex_attention runs through an internal torch.compile; under a TorchDispatchMode its
    operator has no rule for (PyTorch's FLOP counter, the placement recorder) it raises, and in
    torch 2.13 that failed trace stays in dynamo's cache: every later eager call in the process
    fails until dynamo is reset. Refusing first keeps the process usable and says why.
    """
    try:
        from torch._higher_order_ops.flex_attention import flex_attention as flex_op
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        rules = flex_op.python_key_table  # private: without it, nothing is checked
    except (ImportError, AttributeError):
        return
    for mode in _get_current_dispatch_mode_stack():
        # Only the modes with a rule of their own: a mode that merely accepts operators like
        # this one (PyTorch's FLOP counter does) fails inside it the same way.
        if type(mode) not in rules:
            raise NotImplementedError(
                f"eager FlexAttention has no rule for dispatch mode {type(mode).__name__} in "
                f"torch {torch.__version__}; not attempted (a failed attempt breaks every later "
                "eager FlexAttention call in this process)"
            )


@torch.compiler.disable
def build_block_mask_outside_graph(module: FlexAttentionModule):
    """The mask is built before the attention call, as users do, and never inside a compiled
    graph: its build is timed apart (probes/flex.py). A compiled step meets it built already
    (the eager step runs first); were it not, this is a graph break, not a wrong answer."""
    return module.build_block_mask()


@functools.cache
def backward_unsupported(device: str) -> str | None:
    """Why FlexAttention cannot run a backward on ``device``, asked of torch itself with a tiny
    call (torch 2.13 refuses CPU backward, eager and compiled alike); None if it can."""
    from torch.nn.attention.flex_attention import flex_attention

    x = torch.zeros(1, 1, 16, 16, device=device, requires_grad=True)
    try:
        flex_attention(x, x, x).sum().backward()
    except NotImplementedError as exc:
        return (
            f"FlexAttention backward is not supported on {device} in torch "
            f"{torch.__version__}: {exc}"
        )
    except Exception:  # some other fault: not a declared gap; the case meets it and says so
        return None
    return None
