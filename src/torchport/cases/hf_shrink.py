"""Shrink a Hugging Face config to a tiny, random-init model that still exercises its architecture.

One generic rule (a table of field -> small value, with the aliases older configs use) applies to
the config and every sub-config it holds; per-family rules then repair what the generic rule
breaks (latent-attention ranks, per-layer lists, hybrid layer patterns, special token ids).
Rules are plain functions over a config, so an unknown family still gets the generic rule.

To add a family rule: write ``def _fix_<what>(cfg) -> None`` and append it to ``FAMILY_RULES``.
"""

from __future__ import annotations

from typing import Any

MAX_PARAMS = 10_000_000  # every case must stay under this, checked on the meta device

HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
INTERMEDIATE = 128
VOCAB = 256
EXPERTS = 4
EXPERTS_PER_TOKEN = 2
MOE_INTERMEDIATE = 32
MAX_POSITIONS = 512

# field -> small value. Only fields already present on a config (and holding an int) are set.
GENERIC_RULE: dict[str, int] = {
    # width
    "hidden_size": HIDDEN, "n_embd": HIDDEN, "d_model": HIDDEN, "dim": HIDDEN, "n_embed": HIDDEN,
    "embed_dim": HIDDEN, "word_embed_proj_dim": HIDDEN, "embedding_size": HIDDEN,
    # depth
    "num_hidden_layers": LAYERS, "n_layer": LAYERS, "n_layers": LAYERS, "num_layers": LAYERS,
    "decoder_layers": LAYERS, "encoder_layers": LAYERS,
    # heads
    "num_attention_heads": HEADS, "n_head": HEADS, "n_heads": HEADS, "num_heads": HEADS,
    "decoder_attention_heads": HEADS, "encoder_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS, "n_kv_heads": KV_HEADS, "num_kv_heads": KV_HEADS,
    "multi_query_group_num": KV_HEADS,
    "head_dim": HEAD_DIM, "attention_head_dim": HEAD_DIM, "kv_channels": HEAD_DIM,
    # feed-forward
    "intermediate_size": INTERMEDIATE, "n_inner": INTERMEDIATE, "ffn_dim": INTERMEDIATE,
    "decoder_ffn_dim": INTERMEDIATE, "encoder_ffn_dim": INTERMEDIATE, "ffn_hidden_size": INTERMEDIATE,
    "d_ff": INTERMEDIATE,
    # vocabulary and positions
    "vocab_size": VOCAB, "n_positions": MAX_POSITIONS, "max_position_embeddings": MAX_POSITIONS,
    "n_ctx": MAX_POSITIONS, "seq_length": MAX_POSITIONS,
    # mixture of experts
    "num_experts": EXPERTS, "num_local_experts": EXPERTS, "n_routed_experts": EXPERTS,
    "moe_num_experts": EXPERTS, "num_experts_per_tok": EXPERTS_PER_TOKEN,
    "moe_k": EXPERTS_PER_TOKEN, "top_k": EXPERTS_PER_TOKEN,
    "moe_intermediate_size": MOE_INTERMEDIATE, "shared_expert_intermediate_size": MOE_INTERMEDIATE,
    "expert_intermediate_size": MOE_INTERMEDIATE,
}


EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")

# Layer-type names (from layer_types, layers_block_type, block_types) that carry a recurrent state
# instead of, or besides ("hybrid"), attention.
RECURRENT_LAYER_TYPES = {"linear_attention", "mamba", "conv", "recurrent"}
BOTH_LAYER_TYPES = {"hybrid", "hybrid_sliding"}
# Recurrent families whose configs name no layer types.
RECURRENT_MODEL_TYPES = {"rwkv", "xlstm"}


def _get(cfg: Any, name: str, default: Any = None) -> Any:
    """getattr that also treats a per-layer attribute of a heterogeneous config as absent."""
    try:
        return getattr(cfg, name, default)
    except RuntimeError:  # AmbiguousGlobalPerLayerAttributeError: varies across layers
        return default


def _is_settable(cfg: Any, name: str) -> bool:
    """False for read-only properties (e.g. a derived ``head_dim``): setting them raises."""
    attr = getattr(type(cfg), name, None)
    return not (isinstance(attr, property) and attr.fset is None)


def _set(cfg: Any, name: str, value: Any) -> None:
    if _is_settable(cfg, name):
        setattr(cfg, name, value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def apply_generic_rule(cfg: Any) -> None:
    """Set every field of ``GENERIC_RULE`` that the config already holds as an int."""
    for name, small in GENERIC_RULE.items():
        if _is_int(_get(cfg, name)):
            _set(cfg, name, small)


def sub_configs(cfg: Any) -> list[Any]:
    """The config and every config nested in it (text, vision, audio towers...), depth first."""
    from transformers import PretrainedConfig

    found, stack = [], [cfg]
    while stack:
        node = stack.pop()
        if any(node is seen for seen in found):
            continue
        found.append(node)
        stack.extend(v for v in vars(node).values() if isinstance(v, PretrainedConfig))
    return found


def _fix_special_token_ids(cfg: Any) -> None:
    """Move token ids that fall outside the shrunk vocabulary to free slots at its top."""
    vocab = getattr(cfg, "vocab_size", None)
    if not _is_int(vocab):
        return
    names = [n for n in vars(cfg) if n.endswith(("_token_id", "_token_index", "_token_ids"))]
    used = {i for n in names for i in _as_ids(getattr(cfg, n)) if i < vocab}
    moved: dict[int, int] = {}
    free = (i for i in range(vocab - 1, -1, -1) if i not in used)
    for name in names:
        value = getattr(cfg, name)
        ids = [moved.setdefault(i, next(free)) if i >= vocab else i for i in _as_ids(value)]
        _set(cfg, name, ids if isinstance(value, (list, tuple)) else ids[0] if ids else value)


def _as_ids(value: Any) -> list[int]:
    if _is_int(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if _is_int(v)]
    return []


def special_token_ids(cfg: Any) -> set[int]:
    """Every token id a config (or a sub-config) gives a special meaning (pad, image, eos...)."""
    return {i for node in sub_configs(cfg) for n in vars(node)
            if n.endswith(("_token_id", "_token_index", "_token_ids"))
            for i in _as_ids(getattr(node, n))}


FAMILY_RULES = [_fix_special_token_ids]


def shrink_config(cfg: Any) -> Any:
    """Shrink ``cfg`` in place (and its sub-configs) and return it."""
    for node in sub_configs(cfg):
        apply_generic_rule(node)
        for rule in FAMILY_RULES:
            rule(node)
    return cfg


def make_config(model_type: str, overrides: dict | None = None) -> Any:
    """The default config of ``model_type``, shrunk, with ``overrides`` applied last."""
    from transformers import AutoConfig

    cfg = shrink_config(AutoConfig.for_model(model_type))
    for name, value in (overrides or {}).items():
        setattr(cfg, name, value)
    return cfg


def count_params_meta(cfg: Any) -> int:
    """Parameters of the model ``cfg`` builds, counted on the meta device (nothing allocated)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


class TooManyParams(ValueError):
    """The shrunk model is still too large to be a cheap case."""


def check_param_budget(cfg: Any, limit: int = MAX_PARAMS) -> int:
    """The parameter count of ``cfg``'s model; raises ``TooManyParams`` past ``limit``."""
    params = count_params_meta(cfg)
    if params > limit:
        raise TooManyParams(f"{cfg.model_type}: {params:,} parameters after shrinking, "
                            f"over the {limit:,} limit; a shrink rule is missing")
    return params


def text_vocab_size(cfg: Any) -> int:
    """Vocabulary of the decoder that reads ``input_ids``."""
    return cfg.get_text_config(decoder=True).vocab_size


def family_tags(cfg: Any) -> tuple[str, ...]:
    """Tags from the (unshrunk) config: dense, moe, ssm, hybrid, mla, multimodal-text."""
    text = cfg.get_text_config(decoder=True)
    tags = []
    if len(sub_configs(cfg)) > 1:
        tags.append("multimodal-text")
    if any(_is_int(_get(text, n)) and _get(text, n) > 1 for n in EXPERT_FIELDS):
        tags.append("moe")
    if _is_int(_get(text, "kv_lora_rank")):
        tags.append("mla")
    kinds = _layer_kinds(text)
    if kinds == {"recurrent"}:
        tags.append("ssm")
    elif kinds == {"recurrent", "attention"}:
        tags.append("hybrid")
    if not {"moe", "ssm"} & set(tags):
        tags.append("dense")
    return tuple(tags)


def _layer_kinds(text: Any) -> set[str]:
    """{"attention"}, {"recurrent"} or both, from the layer pattern a config declares."""
    names = set()
    for field in ("layer_types", "layers_block_type", "block_types"):
        value = _get(text, field)
        if isinstance(value, (list, tuple)):
            names.update(str(v) for v in value)
    if not names:
        return {"recurrent"} if text.model_type in RECURRENT_MODEL_TYPES else {"attention"}
    kinds = set()
    for name in names:
        if name in BOTH_LAYER_TYPES:
            kinds |= {"recurrent", "attention"}
        elif name in RECURRENT_LAYER_TYPES:
            kinds.add("recurrent")
        elif "attention" in name:
            kinds.add("attention")
    return kinds
