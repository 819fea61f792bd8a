"""The ``hf`` suite: one tiny random-init causal LM per entry of transformers' causal-LM mapping.

Each case shrinks the architecture's default config (``hf_shrink``), builds the class the
mapping names from it (random init, float32, CPU, eager attention and eager experts), and trains
on random token ids with ``labels=input_ids``. No weights are downloaded. Architectures that
cannot run as a plain causal LM carry their reason from ``hf_exclusions``.

The runner's entry points: ``hf_suite()`` (registered as the ``hf`` suite), ``HFCase.build``,
``HFCase.describe`` (cheap: tags, no model) and ``HFCase.param_count`` (meta device).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from torchport.cases.base import Case, Size, Workload, cataloged
from torchport.cases.hf_exclusions import EXCLUSIONS

# hf_shrink imports torch and transformers only inside its functions.
from torchport.cases.hf_shrink import (
    EXPERT_FIELDS,
    causal_lm_class,
    causal_lm_config,
    check_param_budget,
    count_params_meta,
    make_config,
    read_field,
    shrink_config,
    special_token_ids,
    sub_configs,
    text_vocab_size,
)

PARITY_BATCH, PARITY_SEQ = 2, 16
PERF_BATCH, PERF_SEQ = 4, 128
# Audio decoders that read one token row per codebook (moshi has codebooks too, but its causal
# LM is the plain text decoder).
CODEBOOK_DECODERS = {"musicgen", "musicgen_melody"}


class HFCase(Case):
    """``hf/<model_type>``: the shrunk architecture trained one step on random tokens."""

    def __init__(
        self,
        model_type: str,
        *,
        id_prefix: str = "hf/",
        overrides: dict | None = None,
        version: int = 1,
    ):
        self.model_type = model_type
        self.id = f"{id_prefix}{model_type}"
        self.overrides = dict(overrides or {})
        self.version = version
        self.skip_reason = EXCLUSIONS.get(model_type)

    @functools.cached_property
    def tags(self) -> tuple[str, ...]:  # type: ignore[override]
        """Family tags, read from the shrunk config (imports transformers, builds no model)."""
        try:
            return case_tags(self.model_type)
        except Exception:  # noqa: BLE001 - a config that cannot be made has no tags; build says why
            return ()

    def describe(self) -> dict:
        """Cheap facts: the base ones (with tags) and the architecture; no model is built."""
        return {**super().describe(), "model_type": self.model_type}

    def param_count(self) -> int:
        """Parameters of the shrunk model, counted on the meta device (nothing allocated)."""
        if self.overrides:
            return _count_params(self.model_type, self.overrides)
        return param_count(self.model_type)

    def config(self) -> Any:
        """The shrunk config this case builds (a fresh object on every call)."""
        return make_config(self.model_type, self.overrides)

    def build(self, *, seed: int, size: Size) -> Workload:
        import torch

        cfg = self.config()
        model_class = causal_lm_class(self.model_type, cfg)
        params = check_param_budget(model_class, cfg)  # raises before any memory is allocated
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_model(model_class, cfg)
        batch, seq = _input_shape(size)
        codebooks = cfg.num_codebooks if self.model_type in CODEBOOK_DECODERS else None
        kwargs = token_inputs(cfg, batch, seq, seed, codebooks=codebooks)
        if _accepts(model, "use_cache"):
            kwargs["use_cache"] = False
        return Workload(
            model=model,
            kwargs=kwargs,
            loss_fn=_loss,
            tokens=batch * seq,
            samples=batch,
            meta={
                "config": config_dict(cfg),
                "params": params,
                "reference_loss": precise_loss(model),
            },
        )


def _loss(out: Any) -> Any:
    return out.loss


def causal_lm_loss(
    logits,
    labels,
    vocab_size: int,
    num_items_in_batch=None,
    ignore_index: int = -100,
    shift_labels=None,
    **kwargs,
):
    """transformers' ``ForCausalLMLoss`` (same numbers), but upcasting logits only *to*
    float32: float64 logits (the reference) keep float64, where ``logits.float()`` would make
    the reference loss, and every gradient through it, only float32-deep. Same numbers for
    float32 and below.

    It runs inside the measured step on every device, so it uses only core aten ops
    (docs/design.md rule 10): the dtype is chosen in Python, not with ``torch.promote_types``
    (an aten op of its own, which torchax, for one, has no lowering for), and cross entropy is
    spelled out (``nll_loss`` is not a core op).
    """
    import torch

    if logits.dtype != torch.float64:
        logits = logits.float()
    if shift_labels is None:  # tokens < n predict n
        labels = torch.nn.functional.pad(labels, (0, 1), value=ignore_index)
        shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, vocab_size)  # (B * T, vocab)
    shift_labels = shift_labels.view(-1).to(logits.device)  # (B * T,)
    # Cross entropy from core ops, forward and backward (nll_loss is not one, nor gather's
    # backward): log-softmax, then each row's label entry picked by comparison.
    kept = shift_labels != ignore_index  # (B * T,)
    log_probs = torch.log_softmax(logits, dim=-1)
    vocab = torch.arange(0, vocab_size, 1, device=logits.device)  # (vocab,); arange.start_step
    chosen = (vocab.unsqueeze(0) == shift_labels.unsqueeze(1)) & kept.unsqueeze(1)  # (B*T, vocab)
    # sum over dims: sum.dim_IntList is core, sum() is not
    total = -torch.where(chosen, log_probs, 0.0).sum([0, 1])
    if num_items_in_batch is None:  # the mean over the tokens that count, as "mean" does
        return total / kept.sum(0)
    if isinstance(num_items_in_batch, torch.Tensor):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


def precise_loss(model: Any) -> str:
    """Give a model that uses transformers' causal-LM loss the float64-preserving one; say
    how deep the reference loss is."""
    try:
        from transformers.loss.loss_utils import ForCausalLMLoss

        uses_default = model.loss_function is ForCausalLMLoss
    except Exception:  # noqa: BLE001 - an architecture without the property keeps its own
        uses_default = False
    if not uses_default:
        return (
            "the model's own loss function (may cast logits to float32: the reference "
            "loss can be only float32-deep)"
        )
    model.loss_function = causal_lm_loss
    return "float64 from float64 logits (ForCausalLMLoss without its float32 cast)"


def _input_shape(size: Size) -> tuple[int, int]:
    batch, seq = (PERF_BATCH, PERF_SEQ) if size.perf else (PARITY_BATCH, PARITY_SEQ)
    return size.batch or batch, size.seq or seq


def _accepts(model: Any, name: str) -> bool:
    import inspect

    return name in inspect.signature(model.forward).parameters


def build_model(model_class: Any, cfg: Any) -> Any:
    """Random-init float32 model with eager attention and eager (per-expert loop) MoE.

    Eager kernels are plain PyTorch on every device and run in float64, which the runner's
    reference needs (the default grouped_mm experts refuse float64). Where an architecture
    refuses eager attention, it keeps its default.
    """
    import torch

    kwargs = {"dtype": torch.float32, "experts_implementation": "eager"}
    try:
        model = model_class._from_config(cfg, attn_implementation="eager", **kwargs)
    except (ValueError, TypeError):  # this architecture does not offer eager attention
        model = model_class._from_config(cfg, **kwargs)
    return model.float()


def token_inputs(
    cfg: Any, batch: int, seq: int, seed: int, *, codebooks: int | None = None
) -> dict:
    """``input_ids`` and ``labels`` (the same tokens: the model shifts them) for one step.

    Codebook decoders read one row per codebook, ``(batch * codebooks, seq)``, and take labels
    as ``(batch, seq, codebooks)``.
    """
    if not codebooks:
        input_ids = random_token_ids(cfg, batch, seq, seed)
        return {"input_ids": input_ids, "labels": input_ids}
    input_ids = random_token_ids(cfg, batch * codebooks, seq, seed)
    labels = input_ids.view(batch, codebooks, seq).transpose(1, 2)  # (batch, seq, codebooks)
    return {"input_ids": input_ids, "labels": labels}


def random_token_ids(cfg: Any, rows: int, seq: int, seed: int) -> Any:
    """(rows, seq) int64 ids inside the text vocabulary, clear of every special id."""
    import torch

    vocab = text_vocab_size(cfg)
    special = special_token_ids(cfg)
    allowed = torch.tensor([i for i in range(vocab) if i not in special], dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(len(allowed), (rows, seq), generator=generator)
    return allowed[picks]


def config_dict(cfg: Any) -> dict:
    """The full config as plain JSON types (to_dict can hold tuples or dtypes)."""
    return json.loads(cfg.to_json_string(use_diff=False))


@functools.cache
def param_count(model_type: str) -> int:
    """Parameters of ``hf/<model_type>``, counted on the meta device (``torchport cases hf``)."""
    return _count_params(model_type, {})


def _count_params(model_type: str, overrides: dict) -> int:
    cfg = make_config(model_type, overrides)
    return count_params_meta(causal_lm_class(model_type, cfg), cfg)


def catalog_key() -> str:
    """The installed transformers and the code that reads its configs into tags."""
    from importlib.metadata import version

    from torchport.cache import sources_digest

    code = sources_digest(__name__, "torchport.cases.hf_shrink", "torchport.cases.hf_exclusions")
    return f"transformers-{version('transformers')}-{code}"


@cataloged(catalog_key)
def hf_suite() -> list[Case]:
    """One case per entry of transformers' causal-LM mapping, sorted by model type."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return [HFCase(model_type) for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)]


# ---------------------------------------------------------------------------------------------
# Family tags, read from configs (no model is built)

TAG_VOCABULARY = ("dense", "moe", "ssm", "hybrid", "mla", "multimodal-text")
# Layer-type names that carry a recurrent state instead of attention, or besides it ("hybrid").
RECURRENT_LAYER_TYPES = {"linear_attention", "mamba", "conv", "recurrent"}
BOTH_LAYER_TYPES = {"hybrid", "hybrid_sliding"}
RECURRENT_MODEL_TYPES = {"rwkv", "xlstm"}  # recurrent families whose configs name no layer types
MODALITY_MARKERS = ("vision", "audio", "vq_config")  # in the names of nested tower configs


def case_tags(model_type: str) -> tuple[str, ...]:
    """Tags of ``hf/<model_type>``: from its shrunk config, plus whether it is multimodal."""
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(model_type)
    multimodal = _is_multimodal(cfg)  # read before causal_lm_config may pick the decoder part
    return family_tags(shrink_config(causal_lm_config(model_type, cfg)), multimodal=multimodal)


def family_tags(cfg: Any, *, multimodal: bool) -> tuple[str, ...]:
    """A subset of ``TAG_VOCABULARY``. ``dense``: neither experts nor a pure recurrent stack."""
    text = cfg.get_text_config(decoder=True)
    tags = ["multimodal-text"] if multimodal else []
    expert_counts = [read_field(node, n) for node in sub_configs(text) for n in EXPERT_FIELDS]
    if any(isinstance(count, int) and count > 1 for count in expert_counts):  # dbrx: ffn_config
        tags.append("moe")
    if isinstance(read_field(text, "kv_lora_rank"), int):
        tags.append("mla")
    kinds = _layer_kinds(text)
    if kinds == {"recurrent"}:
        tags.append("ssm")
    elif kinds == {"recurrent", "attention"}:
        tags.append("hybrid")
    if not {"moe", "ssm"} & set(tags):
        tags.append("dense")
    return tuple(tags)


def _is_multimodal(cfg: Any) -> bool:
    """Whether the config nests a text config or a vision/audio tower (dbrx's attention and FFN
    sub-configs, or blt's byte-level encoder/decoder, do not count)."""
    from transformers import PretrainedConfig

    nested = [name for name, value in vars(cfg).items() if isinstance(value, PretrainedConfig)]
    return any(name == "text_config" or any(m in name for m in MODALITY_MARKERS) for name in nested)


def _layer_kinds(text: Any) -> set[str]:
    """{"attention"}, {"recurrent"} or both, from the layer pattern a config declares."""
    names: set[str] = set()
    for name in ("layer_types", "layers_block_type", "block_types"):
        value = read_field(text, name)
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
