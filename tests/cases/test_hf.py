"""The hf suite: shrunk causal LMs build small and train one step on the CPU, across families."""

import copy
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torchport.cases.base import Size  # noqa: E402
from torchport.cases.hf import TAG_VOCABULARY, HFCase, hf_suite, param_count  # noqa: E402
from torchport.cases.hf_exclusions import EXCLUSIONS  # noqa: E402
from torchport.cases.hf_shrink import (  # noqa: E402
    HIDDEN,
    LAYERS,
    MAX_PARAMS,
    VOCAB,
    TooManyParams,
    causal_lm_class,
    check_param_budget,
    make_config,
    shrink_config,
)

# One architecture per family (model type -> a tag it must carry).
FAMILIES = {
    "llama": "dense",
    "gpt2": "dense",  # old field names: n_embd, n_layer, n_head
    "qwen3_moe": "moe",
    "mamba": "ssm",
    "jamba": "hybrid",  # attention and Mamba layers, placed by period/offset
    "deepseek_v3": "mla",
    "gemma3": "multimodal-text",  # text part of a vision-language model
    "gemma4_text": "dense",  # per-layer overrides (heterogeneous config)
}


def _step(model_type: str):
    """Build at seed 0, run forward + backward in eval mode (as the runner does)."""
    workload = HFCase(model_type).build(seed=0, size=Size())
    model = workload.model.eval()
    reference = copy.deepcopy(model).double()
    loss = workload.loss_fn(model(**workload.kwargs))
    loss.backward()
    with torch.no_grad():
        loss64 = workload.loss_fn(reference(**workload.kwargs))
    return workload, loss, loss64


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_family_builds_small_and_trains(model_type):
    workload, loss, loss64 = _step(model_type)
    params = sum(p.numel() for p in workload.model.parameters())
    assert workload.meta["params"] == params < MAX_PARAMS
    assert math.isfinite(loss.item())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in workload.model.parameters())
    assert loss64.item() == pytest.approx(loss.item(), rel=1e-3)
    tags = HFCase(model_type).tags
    assert FAMILIES[model_type] in tags and set(tags) <= set(TAG_VOCABULARY)


def test_workload_shape_and_meta():
    workload = HFCase("llama").build(seed=3, size=Size())
    input_ids = workload.kwargs["input_ids"]
    assert input_ids.shape == (2, 16) and workload.tokens == 32 and workload.samples == 2
    assert workload.kwargs["labels"] is input_ids and workload.kwargs["use_cache"] is False
    assert 0 <= input_ids.min() and input_ids.max() < VOCAB
    config = workload.meta["config"]
    assert config["hidden_size"] == HIDDEN and config["num_hidden_layers"] == LAYERS
    assert next(workload.model.parameters()).dtype == torch.float32


def test_sizes_override_and_perf():
    case = HFCase("gpt2")
    assert case.build(seed=0, size=Size(batch=3, seq=5)).kwargs["input_ids"].shape == (3, 5)
    assert case.build(seed=0, size=Size(perf=True)).kwargs["input_ids"].shape == (4, 128)


def test_overrides_apply_after_the_shrink():
    case = HFCase("gemma3", overrides={"text_config.intermediate_size": 256}, id_prefix="x/")
    assert case.id == "x/gemma3" and case.config().text_config.intermediate_size == 256
    assert case.param_count() > param_count("gemma3")


def test_same_seed_same_workload():
    first, second = (HFCase("llama").build(seed=7, size=Size()) for _ in range(2))
    assert torch.equal(first.kwargs["input_ids"], second.kwargs["input_ids"])
    for a, b in zip(first.model.parameters(), second.model.parameters(), strict=True):
        assert torch.equal(a, b)
    other = HFCase("llama").build(seed=8, size=Size())
    assert not torch.equal(first.kwargs["input_ids"], other.kwargs["input_ids"])


def test_token_ids_avoid_special_ids():
    """gemma3's image token must not appear in text-only input (it would ask for pixels)."""
    cfg = make_config("gemma3")
    ids = HFCase("gemma3").build(seed=0, size=Size()).kwargs["input_ids"]
    assert cfg.image_token_id < cfg.get_text_config().vocab_size
    assert not (ids == cfg.image_token_id).any()


def test_codebook_decoder_inputs():
    """musicgen reads (batch * codebooks, seq) ids and (batch, seq, codebooks) labels."""
    workload = HFCase("musicgen").build(seed=0, size=Size())
    codebooks = workload.meta["config"]["num_codebooks"]
    assert workload.kwargs["input_ids"].shape == (2 * codebooks, 16)
    assert workload.kwargs["labels"].shape == (2, 16, codebooks)


class MadeUpConfig(transformers.PretrainedConfig):
    """A family transformers has never heard of, with old and new field names."""

    model_type = "made_up_family"

    def __init__(self, **kwargs):
        self.n_embd, self.n_layer, self.n_head = 4096, 48, 32
        self.intermediate_size, self.vocab_size = 11008, 50_000
        self.layer_types = ["full_attention", "sliding_attention", "sliding_attention"] * 16
        super().__init__(bos_token_id=49_999, eos_token_id=[49_998, 1], **kwargs)

    @property
    def derived_width(self):  # read-only: the shrink must leave it alone
        return self.n_embd * 2


def test_unknown_family_gets_the_generic_rule():
    cfg = shrink_config(MadeUpConfig())
    assert (cfg.n_embd, cfg.n_head, cfg.intermediate_size, cfg.vocab_size) == (
        HIDDEN,
        4,
        128,
        VOCAB,
    )
    assert cfg.derived_width == 2 * HIDDEN
    # layer_types keeps one layer of every distinct type, and the layer count follows it
    assert cfg.layer_types == ["full_attention", "sliding_attention"] and cfg.n_layer == 2
    # special ids move inside the vocabulary and stay distinct
    ids = [cfg.bos_token_id, *cfg.eos_token_id]
    assert all(0 <= i < VOCAB for i in ids) and len(set(ids)) == 3 and 1 in ids


def test_unknown_model_type_is_a_build_error_not_a_crash():
    case = HFCase("no_such_architecture")
    assert case.id == "hf/no_such_architecture" and case.tags == ()
    with pytest.raises(ValueError):
        case.build(seed=0, size=Size())


def test_parameter_budget_is_enforced():
    cfg = make_config("llama")
    with pytest.raises(TooManyParams, match="limit"):
        check_param_budget(causal_lm_class("llama", cfg), cfg, limit=1_000)
    assert param_count("llama") == HFCase("llama").param_count() < MAX_PARAMS


def test_excluded_architecture_reports_its_reason():
    case = HFCase("reformer")
    assert case.skip_reason == EXCLUSIONS["reformer"]
    assert case.describe()["skip_reason"] == EXCLUSIONS["reformer"]
    assert HFCase("llama").skip_reason is None


def test_suite_has_one_case_per_mapping_entry():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    cases = hf_suite()
    assert [c.model_type for c in cases] == sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    assert len({c.id for c in cases}) == len(cases)
    assert all(c.id == f"hf/{c.model_type}" for c in cases)
    assert set(EXCLUSIONS) <= set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
