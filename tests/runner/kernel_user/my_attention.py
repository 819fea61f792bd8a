"""A team's attention for transformers' LlamaAttention (reduced llama), with SDPA inside.

``attention`` is right. ``attention_rows_assumed`` packs its input with a hand-written loader
that assumes contiguous rows: right on everything the model gives it (contiguous), wrong on a
non-contiguous, transposed or expanded input. transformers calls attention by keyword
(``self_attn(hidden_states=..., position_embeddings=..., attention_mask=...)``).

    torchport run --workload my_attention:attention_rows_assumed --device cpu --modes eager
"""

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv

from torchport.cases.kernels import Replacement, replacement


def _rows_assumed(x):
    """The loader's bug: x's storage read as if x were contiguous."""
    strides, step = [], 1
    for size in reversed(x.shape):
        strides.insert(0, step)
        step *= size
    return torch.as_strided(x, x.shape, strides, x.storage_offset())


class Attention(torch.nn.Module):
    loader = staticmethod(lambda x: x.contiguous())

    def __init__(self, original):
        super().__init__()
        self.q_proj, self.k_proj = original.q_proj, original.k_proj
        self.v_proj, self.o_proj = original.v_proj, original.o_proj
        self.head_dim, self.scaling = original.head_dim, original.scaling
        self.groups = original.num_key_value_groups

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, **kwargs):
        x = self.loader(hidden_states)
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        mask = attention_mask[:, :, :, : k.shape[-2]] if attention_mask is not None else None
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None and t > 1, scale=self.scaling
        )
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1)), None


class RowsAssumedAttention(Attention):
    loader = staticmethod(_rows_assumed)


@replacement
def attention():
    return Replacement(
        name="attention", target="LlamaAttention", make=Attention, dtypes=("float32", "bfloat16")
    )


@replacement
def attention_rows_assumed():
    return Replacement(
        name="attention_rows_assumed",
        target="LlamaAttention",
        make=RowsAssumedAttention,
        dtypes=("float32", "bfloat16"),
    )
