"""Shrink a Hugging Face config to a tiny, random-init model that still exercises its architecture.

One generic rule (a table of field -> small value, with the aliases older configs use) applies to
the config and every sub-config it holds (text, vision, audio towers); rules for families of
architectures then repair what the table alone breaks: latent-attention (MLA) ranks, state-space
mixer sizes, layer patterns of hybrids, per-layer overrides, special token ids. Each rule reads
fields, never model types, so an unknown architecture still gets every rule that applies to its
fields. ``FAMILY_FIXES`` holds the few settings that only one architecture needs, each with why.

To add a rule: write ``def _shrink_<what>(node, before) -> None`` and append it to ``RULES``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

MAX_PARAMS = 10_000_000  # every case must stay under this, counted on the meta device

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
RANK = 32  # low-rank projections: MLA q/kv/o ranks, LoRA-like adapters
SMALL_DIM = 8  # rotary and latent sub-dims, conv channels per group, dt ranks
SSM_HEADS = 8
SSM_STATE = 16

# field -> small value. Only fields a config already holds as an int are set.
GENERIC_RULE: dict[str, int] = {
    # width
    "hidden_size": HIDDEN,
    "n_embd": HIDDEN,
    "d_model": HIDDEN,
    "n_embed": HIDDEN,
    "embed_dim": HIDDEN,
    "word_embed_proj_dim": HIDDEN,
    "embedding_size": HIDDEN,
    "embedding_dim": HIDDEN,
    "hidden_size_global": HIDDEN,
    "pronunciation_embed_dim": HIDDEN,
    "shape_embed_dim": HIDDEN,
    "ext_pw_out_channel": HIDDEN,
    "depthwise_separable_out_channel": HIDDEN,
    "nemo_conv_channels": HIDDEN,
    "projection_dim": HIDDEN,
    "vision_embed_dim": HIDDEN,
    "audio_embed_dim": HIDDEN,
    "lru_width": HIDDEN,
    "output_embedding_size": HIDDEN,
    "router_hidden_size": HIDDEN,
    # depth
    "num_hidden_layers": LAYERS,
    "n_layer": LAYERS,
    "n_layers": LAYERS,
    "num_layers": LAYERS,
    "decoder_layers": LAYERS,
    "encoder_layers": LAYERS,
    "num_encoder_layers": LAYERS,
    "num_decoder_layers": LAYERS,
    "num_blocks": LAYERS,
    "depth": LAYERS,
    # attention heads
    "num_attention_heads": HEADS,
    "n_head": HEADS,
    "n_heads": HEADS,
    "num_heads": HEADS,
    "decoder_attention_heads": HEADS,
    "encoder_attention_heads": HEADS,
    "swa_num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS,
    "n_kv_heads": KV_HEADS,
    "num_kv_heads": KV_HEADS,
    "multi_query_group_num": KV_HEADS,
    "swa_num_key_value_heads": KV_HEADS,
    "num_query_groups": KV_HEADS,
    "head_dim": HEAD_DIM,
    "attention_head_dim": HEAD_DIM,
    "kv_channels": HEAD_DIM,
    "attention_head_size": HEAD_DIM,
    "swa_head_dim": HEAD_DIM,
    "global_head_dim": HEAD_DIM,
    "rotary_dim": SMALL_DIM,
    "rotary_emb_dim": SMALL_DIM,
    "dim_head": HEAD_DIM,
    "q_lora_rank": RANK,
    "kv_lora_rank": RANK,
    "o_lora_rank": RANK,
    "hc_lowrank": RANK,
    # linear attention (gated delta net, KDA, lightning): value heads are a multiple of key heads
    "linear_num_heads": HEADS,
    "linear_head_dim": HEAD_DIM,
    "linear_num_key_heads": KV_HEADS,
    "linear_num_value_heads": HEADS,
    "linear_key_head_dim": HEAD_DIM,
    "linear_value_head_dim": HEAD_DIM,
    # feed-forward
    "intermediate_size": INTERMEDIATE,
    "n_inner": INTERMEDIATE,
    "ffn_dim": INTERMEDIATE,
    "decoder_ffn_dim": INTERMEDIATE,
    "encoder_ffn_dim": INTERMEDIATE,
    "ffn_hidden_size": INTERMEDIATE,
    "d_ff": INTERMEDIATE,
    "feed_forward_size": INTERMEDIATE,
    "dense_intermediate_size": INTERMEDIATE,
    "dff": INTERMEDIATE,
    "dim_ff": INTERMEDIATE,
    "d_inner": INTERMEDIATE,
    "intermediate_size_mlp": INTERMEDIATE,
    "mlp_dim": INTERMEDIATE,
    # vocabularies and positions (type_vocab_size and friends are already tiny)
    "vocab_size": VOCAB,
    "decoder_vocab_size": VOCAB,
    "shape_vocab_size": VOCAB,
    "pronunciation_vocab_size": VOCAB,
    "vocab_size_per_layer_input": VOCAB,
    "unpadded_vocab_size": VOCAB,
    "encoder_hash_byte_group_vocab": VOCAB,
    "n_positions": MAX_POSITIONS,
    "max_position_embeddings": MAX_POSITIONS,
    "n_ctx": MAX_POSITIONS,
    "seq_length": MAX_POSITIONS,
    # mixture of experts
    "num_experts": EXPERTS,
    "num_local_experts": EXPERTS,
    "n_routed_experts": EXPERTS,
    "moe_num_experts": EXPERTS,
    "num_experts_per_tok": EXPERTS_PER_TOKEN,
    "num_experts_per_token": EXPERTS_PER_TOKEN,
    "moe_k": EXPERTS_PER_TOKEN,
    "moe_topk": EXPERTS_PER_TOKEN,
    "top_k": EXPERTS_PER_TOKEN,
    "moe_intermediate_size": MOE_INTERMEDIATE,
    "expert_intermediate_size": MOE_INTERMEDIATE,
    "shared_expert_intermediate_size": MOE_INTERMEDIATE,
    "expert_ffn_hidden_size": MOE_INTERMEDIATE,
    "shared_experts_intermediate_size": MOE_INTERMEDIATE,
    "moe_shared_expert_intermediate_size": MOE_INTERMEDIATE,
    "shared_intermediate_size": MOE_INTERMEDIATE,
    "zero_expert_num": EXPERTS,
    # adapters and per-layer embeddings
    "hidden_size_per_layer_input": SMALL_DIM,
    "laurel_rank": SMALL_DIM,
    "adapter_rank": SMALL_DIM,
    "ple_embed_dim": HEAD_DIM,
}

EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")

# Sizes some configs leave None (meaning "derive it") and some models then read as None.
FILL_IF_NONE: dict[str, int] = {"head_dim": HEAD_DIM, "num_key_value_heads": KV_HEADS}

# Settings only one architecture needs: a config's model type -> {dotted field path: value},
# applied to that config (top-level or nested) after the rules.
FAMILY_FIXES: dict[str, dict[str, Any]] = {
    # transformers 5.24's default configs do not build or run these; complete them.
    "dbrx": {
        "attn_config.rope_theta": 10000.0,  # DbrxAttention reads a field its config lacks
        "attn_config.clip_qkv": 8.0,
    },  # and clamps q/k/v with clip_qkv even when None
    "dots1": {
        "n_routed_experts": EXPERTS,
        "num_experts_per_tok": EXPERTS_PER_TOKEN,
        "n_shared_experts": 1,
    },  # all None by default, yet every layer is MoE
    "qwen4_exp_text": {  # indexed-attention layers need an indexer; its sizes default to None
        "indexer_n_heads": HEADS,
        "indexer_kv_heads": 1,  # keys are squeezed to one head
        "indexer_head_dim": HEAD_DIM,
        "indexer_budget": SMALL_DIM,
        "indexer_compress_ratio": 2,
    },
    "cohere_compass_text": {  # rope parameters are keyed by layer type, default is empty
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    },
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},  # default leaves layer_types None
    # Hybrids whose default is all-Mamba: place one attention layer so the hybrid is exercised
    # (granitemoehybrid's forward also needs one: it reads the sequence length from its cache).
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "bamba": {"attn_layer_indices": [1]},
    # zamba ties one shared transformer block across its hybrid layers: it needs two of them.
    "zamba": {
        "num_hidden_layers": 3,
        "attn_layer_period": 1,
        "attn_layer_offset": 1,
        "layers_block_type": ["linear_attention", "hybrid", "hybrid"],
    },
    # blt's global transformer reads cross_attn_k (2) local patches side by side: twice as wide.
    "blt": {
        "global_config.hidden_size": 2 * HIDDEN,
        "global_config.head_dim": 2 * HIDDEN // HEADS,
        "encoder_config.hidden_size_global": 2 * HIDDEN,
        "decoder_config.hidden_size_global": 2 * HIDDEN,
    },
    "reformer": {  # a causal LM only as a decoder; positions factorise over axial_pos_shape
        "is_decoder": True,
        "axial_pos_shape": (16, 32),
        "axial_pos_embds_dim": (16, 48),
        "local_attn_chunk_length": SMALL_DIM,
        "lsh_attn_chunk_length": SMALL_DIM,
    },
}

# Names of the layer count, newest first (older configs alias it).
LAYER_COUNT_FIELDS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
# Per-layer lists (one entry per layer) that the layer-pattern rule keeps consistent.
PER_LAYER_LIST_SUFFIXES = (
    "layer_types",
    "layers_block_type",
    "block_types",
    "indexer_types",
    "attn_layers",
    "activation_sparsity_pattern",
    "kv_sharing_modes",
)
# Lists of layer indices, remapped onto the kept layers.
LAYER_INDEX_LISTS = (
    "full_attn_idxs",
    "attn_layer_indices",
    "hybrid_layer_ids",
    "global_attn_layers",
    "no_rope_layers_idx",
)


@dataclass
class Before:
    """What a config held before shrinking, for rules that keep ratios or patterns."""

    values: dict[str, Any]
    layers: int | None  # the layer count, read from layers_field
    layers_field: str = "num_hidden_layers"
    kept_layers: list[int] = field(default_factory=list)  # original indices of kept layers
    per_layer_overrides: dict[int, dict[str, Any]] | None = None

    def get(self, name: str) -> Any:
        return self.values.get(name)


def read_field(cfg: Any, name: str, default: Any = None) -> Any:
    """getattr that treats a per-layer attribute of a heterogeneous config as absent."""
    try:
        return getattr(cfg, name, default)
    except RuntimeError:  # AmbiguousGlobalPerLayerAttributeError: the value varies by layer
        return default


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _set(cfg: Any, name: str, value: Any) -> None:
    """Set a field, skipping read-only ones (a derived property, or a setter that refuses)."""
    attr = getattr(type(cfg), name, None)
    if isinstance(attr, property) and attr.fset is None:
        return
    try:
        setattr(cfg, name, value)
    except NotImplementedError:  # e.g. xlnet's max_position_embeddings, prophetnet's layers
        pass


def _set_if_int(cfg: Any, name: str, value: int) -> None:
    if _is_int(read_field(cfg, name)):
        _set(cfg, name, value)


def sub_configs(cfg: Any) -> list[Any]:
    """The config and every config nested in it (text, vision, audio towers...), depth first."""
    from transformers import PretrainedConfig

    found: list[Any] = []
    stack = [cfg]
    while stack:
        node = stack.pop()
        if any(node is seen for seen in found):
            continue
        found.append(node)
        stack.extend(v for v in vars(node).values() if isinstance(v, PretrainedConfig))
    return found


# ---------------------------------------------------------------------------------------------
# The generic rule and the rules for families of architectures


def apply_generic_rule(node: Any, before: Before) -> None:
    for name, small in GENERIC_RULE.items():
        _set_if_int(node, name, small)
    for name, small in FILL_IF_NONE.items():
        has_attention = read_field(node, "num_attention_heads")
        if name in vars(node) and vars(node)[name] is None and has_attention:
            _set(node, name, small)


def _fill_router_top_k(node: Any, before: Before) -> None:
    """Some MoE configs leave the router's top-k None (deepseek_v2); the router needs a number."""
    has_experts = any(_is_int(read_field(node, n)) for n in EXPERT_FIELDS)
    if has_experts and "num_experts_per_tok" in vars(node) and node.num_experts_per_tok is None:
        _set(node, "num_experts_per_tok", EXPERTS_PER_TOKEN)


def _shrink_latent_attention(node: Any, before: Before) -> None:
    """MLA (ranks are in the generic rule): qk_head_dim = nope + rope, where q is split."""
    if not _is_int(read_field(node, "kv_lora_rank")):
        return
    _set_if_int(node, "qk_nope_head_dim", SMALL_DIM)
    _set_if_int(node, "qk_rope_head_dim", SMALL_DIM)
    _set_if_int(node, "v_head_dim", HEAD_DIM)
    _set_if_int(node, "qk_head_dim", SMALL_DIM + SMALL_DIM)
    # Keys are decompressed for every query head: MLA has as many kv heads as query heads.
    _set_if_int(node, "num_key_value_heads", read_field(node, "num_attention_heads"))
    # The rotary tables are built from head_dim (times a partial-rotary factor) but applied to
    # the rope part of q/k: keep head_dim's ratio to qk_rope_head_dim (1 for DeepSeek).
    head_dim, rope_dim = before.get("head_dim"), before.get("qk_rope_head_dim")
    if _is_int(head_dim) and _is_int(rope_dim) and head_dim % rope_dim == 0:
        _set(node, "head_dim", head_dim // rope_dim * SMALL_DIM)


def _shrink_sparse_indexer(node: Any, before: Before) -> None:
    """DeepSeek sparse attention's indexer: few heads, and a top-k below the sequence length."""
    _set_if_int(node, "index_n_heads", HEADS)
    _set_if_int(node, "index_head_dim", HEAD_DIM)
    _set_if_int(node, "index_topk", SMALL_DIM)


def _shrink_expert_groups(node: Any, before: Before) -> None:
    """Group-limited routing picks groups of experts first: 2 groups of 2, one chosen."""
    for groups in ("n_group", "num_expert_group"):
        if _is_int(before.get(groups)) and before.get(groups) > 1:
            _set(node, groups, 2)
            _set_if_int(node, "topk_group", 1)


# (heads field, head-dim field, inner-width field or None) of state-space mixers, whose
# heads x head_dim must equal expand x hidden.
SSM_MIXERS = (
    ("mamba_n_heads", "mamba_d_head", "mamba_d_ssm"),  # bamba, falcon_h1, granitemoehybrid
    ("n_mamba_heads", "mamba_headdim", None),  # zamba2
    ("mamba_num_heads", "mamba_head_dim", None),  # nemotron_h
    ("num_heads", "head_dim", None),  # mamba2 (only with a state size, see below)
)
SSM_STATE_FIELDS = ("state_size", "mamba_d_state", "ssm_state_size")
SSM_EXPAND_FIELDS = ("mamba_expand", "expand")


def _shrink_state_space(node: Any, before: Before) -> None:
    if not any(_is_int(read_field(node, n)) for n in SSM_STATE_FIELDS):
        return
    for name in SSM_STATE_FIELDS:
        _set_if_int(node, name, SSM_STATE)
    for name in ("time_step_rank", "mamba_dt_rank"):
        _set_if_int(node, name, SMALL_DIM)
    for name in ("n_groups", "mamba_n_groups", "mamba_ngroups"):
        _set_if_int(node, name, 1)
    expands = [read_field(node, n) for n in SSM_EXPAND_FIELDS]
    inner = next((e for e in expands if _is_int(e)), 2) * HIDDEN  # the mixer's inner width
    for heads, head_dim, inner_field in SSM_MIXERS:
        if _is_int(read_field(node, heads)) and _is_int(read_field(node, head_dim)):
            _set(node, heads, SSM_HEADS)
            _set(node, head_dim, inner // SSM_HEADS)
            if inner_field:
                _set_if_int(node, inner_field, inner)
    # zamba's attention reads the concatenation [hidden, original embedding]: twice the width.
    if _is_int(before.get("attention_hidden_size")) and _is_int(before.get("hidden_size")):
        ratio = before.get("attention_hidden_size") // before.get("hidden_size")
        _set(node, "attention_hidden_size", ratio * HIDDEN)
        if _is_int(read_field(node, "attention_head_dim")):
            _set(node, "attention_head_dim", ratio * HIDDEN // HEADS)


def _shrink_layer_periods(node: Any, before: Before) -> None:
    """Patterns given by period/offset or a dense prefix: make both kinds appear in 2 layers."""
    if _is_int(before.get("first_k_dense_replace")) and before.get("first_k_dense_replace") > 0:
        _set(node, "first_k_dense_replace", 1)
    if _is_int(before.get("num_dense_layers")) and before.get("num_dense_layers") > 0:
        _set(node, "num_dense_layers", 1)
    for period, offset in (
        ("attn_layer_period", "attn_layer_offset"),
        ("expert_layer_period", "expert_layer_offset"),
    ):
        if _is_int(before.get(period)) and before.get(period) > LAYERS:
            _set(node, period, LAYERS)
            _set_if_int(node, offset, LAYERS - 1)


def _shrink_kv_sharing(node: Any, before: Before) -> None:
    """Layers that reuse another layer's KV need their producer kept: share none."""
    _set_if_int(node, "num_kv_shared_layers", 0)


def fix_special_token_ids(cfg: Any) -> None:
    """Move token ids outside the shrunk text vocabulary to free slots at its top.

    Runs once over the config and its sub-configs (a composite config holds the image token,
    its text config the vocabulary): the same old id gets the same new slot everywhere, and
    distinct ids stay distinct.
    """
    vocab = read_field(cfg.get_text_config(decoder=True), "vocab_size")
    if not _is_int(vocab):
        return
    fields = [(node, n) for node in sub_configs(cfg) for n in vars(node) if _is_special_id_field(n)]
    used = {i for node, n in fields for i in _as_ids(read_field(node, n)) if i < vocab}
    free = (i for i in range(vocab - 1, -1, -1) if i not in used)
    moved: dict[int, int] = {}
    for node, name in fields:
        value = read_field(node, name)
        ids = [moved.setdefault(i, next(free)) if i >= vocab else i for i in _as_ids(value)]
        if ids:
            _set(node, name, ids if isinstance(value, (list, tuple)) else ids[0])


def _is_special_id_field(name: str) -> bool:
    return name.endswith(("_token_id", "_token_index", "_token_ids"))


def _as_ids(value: Any) -> list[int]:
    if _is_int(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if _is_int(v)]
    return []


RULES = [
    apply_generic_rule,
    _fill_router_top_k,
    _shrink_latent_attention,
    _shrink_sparse_indexer,
    _shrink_expert_groups,
    _shrink_state_space,
    _shrink_layer_periods,
    _shrink_kv_sharing,
]


# ---------------------------------------------------------------------------------------------
# Layer patterns: keep one layer of every distinct kind


def _per_layer_lists(node: Any, layers: int) -> dict[str, list]:
    """Fields holding one entry per layer (layer_types, mlp_layer_types, intermediate_size...)."""
    found = {}
    for name, value in vars(node).items():
        if isinstance(value, (list, tuple)) and len(value) == layers and not name.startswith("_"):
            if name.endswith(PER_LAYER_LIST_SUFFIXES) or name in GENERIC_RULE:
                found[name] = list(value)
    return found


def _choose_kept_layers(
    layers: int, lists: dict[str, list], overrides: dict[int, dict]
) -> list[int]:
    """The first layer of every distinct kind (over per-layer lists and overrides), >= LAYERS."""
    first_of_kind: dict[Any, int] = {}
    for i in range(layers):
        kind = (tuple(str(v[i]) for v in lists.values()), str(overrides.get(i)))
        first_of_kind.setdefault(kind, i)
    kept = sorted(first_of_kind.values())
    for i in range(layers):  # pad with the earliest remaining layers
        if len(kept) >= LAYERS:
            break
        if i not in kept:
            kept = sorted(kept + [i])
    return kept


def _rebuild_per_layer_lists(node: Any, before: Before, lists: dict[str, list]) -> None:
    kept = before.kept_layers
    _set(node, before.layers_field, len(kept))
    for name, values in lists.items():
        small = GENERIC_RULE.get(name)  # a per-layer size (e.g. intermediate_size) shrinks too
        _set(node, name, [small if small and _is_int(values[i]) else values[i] for i in kept])
    for name in LAYER_INDEX_LISTS:
        value = read_field(node, name)
        if isinstance(value, (list, tuple)):
            _set(node, name, [kept.index(i) for i in value if i in kept])


def _lift_per_layer_overrides(node: Any) -> dict[int, dict[str, Any]]:
    """Detach a heterogeneous config's per-layer overrides so its global fields can be set."""
    spec = vars(node).get("_heterogeneity_spec")
    if spec is None:
        return {}
    overrides = copy.deepcopy(spec.per_layer_overrides)
    node.per_layer_config = None
    return overrides


def _restore_per_layer_overrides(node: Any, before: Before) -> None:
    """Re-attach the kept layers' overrides, each keeping its ratio to the shrunk global value."""
    if not before.per_layer_overrides:
        return
    shrunk = {}
    for new_index, old_index in enumerate(before.kept_layers):
        layer = before.per_layer_overrides.get(old_index)
        if layer:
            shrunk[new_index] = {k: _scaled(node, before, k, v) for k, v in layer.items()}
    if shrunk:
        node.per_layer_config = shrunk


def _scaled(node: Any, before: Before, name: str, value: Any) -> Any:
    old, new = before.get(name), read_field(node, name)
    if not (_is_int(value) and _is_int(old) and _is_int(new) and old):
        return value
    return max(1, round(new * value / old))


# ---------------------------------------------------------------------------------------------
# Entry points


def shrink_node(node: Any) -> None:
    """Shrink one config (not its sub-configs) in place."""
    overrides = _lift_per_layer_overrides(node)
    layers_field = next((n for n in LAYER_COUNT_FIELDS if _is_int(read_field(node, n))), None)
    before = Before(
        values=dict(vars(node)),
        per_layer_overrides=overrides,
        layers=read_field(node, layers_field) if layers_field else None,
        layers_field=layers_field or "num_hidden_layers",
    )
    for layer in overrides.values():  # globals the overrides are measured against
        before.values.update({k: read_field(node, k) for k in layer})
    lists = {}
    if before.layers:
        lists = _per_layer_lists(node, before.layers)
        before.kept_layers = _choose_kept_layers(before.layers, lists, overrides)
    for rule in RULES:
        rule(node, before)
    if before.layers and (lists or overrides):
        _rebuild_per_layer_lists(node, before, lists)
    _restore_per_layer_overrides(node, before)


def shrink_config(cfg: Any) -> Any:
    """Shrink ``cfg`` and every sub-config in place, each with its family's fixes; return it."""
    nodes = sub_configs(cfg)
    for node in nodes:
        shrink_node(node)
    for node in nodes:  # after every node is shrunk: a fix may reach into a sub-config
        apply_fields(node, FAMILY_FIXES.get(node.model_type, {}))
    fix_special_token_ids(cfg)
    return cfg


def apply_fields(cfg: Any, fields: dict[str, Any]) -> None:
    """Set ``{"a.b.c": value}`` paths (into sub-configs) on ``cfg``."""
    for path, value in fields.items():
        *parents, name = path.split(".")
        node = cfg
        for parent in parents:
            node = getattr(node, parent)
        setattr(node, name, copy.deepcopy(value))


def make_config(model_type: str, overrides: dict | None = None) -> Any:
    """The default config of ``model_type``'s causal LM, shrunk, with ``overrides`` last.

    ``overrides`` maps dotted field paths (``"text_config.num_hidden_layers"``) to values.
    """
    from transformers import AutoConfig

    cfg = causal_lm_config(model_type, AutoConfig.for_model(model_type))
    shrink_config(cfg)
    apply_fields(cfg, overrides or {})
    return cfg


def causal_lm_class(model_type: str, cfg: Any) -> Any:
    """The class the causal-LM mapping names for ``model_type`` (by config class if unlisted)."""
    import transformers
    from transformers.models.auto import modeling_auto

    name = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if name is not None:
        return getattr(transformers, name)
    return modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING[type(cfg)]


def causal_lm_config(model_type: str, cfg: Any) -> Any:
    """The part of a composite config that the causal-LM class is built from.

    Some mapping entries name a decoder class (e.g. MusicgenForCausalLM) whose config is nested
    in the composite config ``AutoConfig.for_model`` returns; build from that sub-config.
    """
    try:
        config_class = causal_lm_class(model_type, cfg).config_class
    except KeyError:  # an unknown family: build from the config as it is
        return cfg
    if isinstance(cfg, config_class):
        return cfg
    nested = [node for node in sub_configs(cfg)[1:] if type(node) is config_class]
    return nested[0] if len(nested) == 1 else cfg


def special_token_ids(cfg: Any) -> set[int]:
    """Every token id a config (or a sub-config) gives a special meaning (pad, image, eos...)."""
    return {
        i
        for node in sub_configs(cfg)
        for n in vars(node)
        if _is_special_id_field(n)
        for i in _as_ids(read_field(node, n))
    }


def text_vocab_size(cfg: Any) -> int:
    """Vocabulary of the decoder that reads ``input_ids``."""
    return cfg.get_text_config(decoder=True).vocab_size


# ---------------------------------------------------------------------------------------------
# Size checks


class TooManyParams(ValueError):
    """The shrunk model is still too large to be a cheap case."""


def count_params_meta(model_class: Any, cfg: Any) -> int:
    """Parameters of ``model_class(cfg)``, counted on the meta device (nothing allocated)."""
    import torch

    with torch.device("meta"):
        model = model_class._from_config(cfg)
    return sum(p.numel() for p in model.parameters())


def check_param_budget(model_class: Any, cfg: Any, limit: int = MAX_PARAMS) -> int:
    """The parameter count of ``model_class(cfg)``; raises ``TooManyParams`` past ``limit``."""
    params = count_params_meta(model_class, cfg)
    if params > limit:
        raise TooManyParams(
            f"{cfg.model_type}: {params:,} parameters after shrinking, "
            f"over the {limit:,} limit; a shrink rule is missing"
        )
    return params
