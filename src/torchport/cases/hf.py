"""The ``hf`` suite: one tiny random-init causal LM per entry of transformers' causal-LM mapping.

Each case shrinks the architecture's default config (``hf_shrink``), builds
``AutoModelForCausalLM.from_config`` in float32 on the CPU with eager attention, and trains on
random token ids with ``labels=input_ids``. No weights are downloaded. Architectures that cannot
run as a plain causal LM carry their reason from ``hf_exclusions``.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from torchport.cases.base import Case, Size, Workload
from torchport.cases.hf_exclusions import EXCLUSIONS

PARITY_BATCH, PARITY_SEQ = 2, 16
PERF_BATCH, PERF_SEQ = 4, 128


class HFCase(Case):
    """``hf/<model_type>``: the shrunk architecture trained one step on random tokens."""

    def __init__(self, model_type: str, *, id_prefix: str = "hf/", overrides: dict | None = None,
                 version: int = 1):
        self.model_type = model_type
        self.id = f"{id_prefix}{model_type}"
        self.overrides = dict(overrides or {})
        self.version = version
        self.skip_reason = EXCLUSIONS.get(model_type)

    @functools.cached_property
    def tags(self) -> tuple[str, ...]:
        """Family tags, read from the default config (imports transformers, builds no model)."""
        from transformers import AutoConfig

        from torchport.cases.hf_shrink import family_tags

        try:
            return family_tags(AutoConfig.for_model(self.model_type))
        except Exception:  # noqa: BLE001 - an unknown type has no tags; build reports the error
            return ()

    def config(self) -> Any:
        """The shrunk config this case builds (a fresh object on every call)."""
        from torchport.cases.hf_shrink import make_config

        return make_config(self.model_type, self.overrides)

    def build(self, *, seed: int, size: Size) -> Workload:
        import torch

        from torchport.cases.hf_shrink import check_param_budget

        cfg = self.config()
        params = check_param_budget(cfg)  # raises before any memory is allocated
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_model(cfg)
        batch, seq = _input_shape(size)
        input_ids = random_token_ids(cfg, batch, seq, seed)
        kwargs = {"input_ids": input_ids, "labels": input_ids}
        if _accepts(model, "use_cache"):
            kwargs["use_cache"] = False
        return Workload(model=model, kwargs=kwargs, loss_fn=_loss, tokens=batch * seq,
                        samples=batch, meta={"config": config_dict(cfg), "params": params})


def _loss(out: Any) -> Any:
    return out.loss


def _input_shape(size: Size) -> tuple[int, int]:
    batch, seq = (PERF_BATCH, PERF_SEQ) if size.perf else (PARITY_BATCH, PARITY_SEQ)
    return size.batch or batch, size.seq or seq


def _accepts(model: Any, name: str) -> bool:
    import inspect

    return name in inspect.signature(model.forward).parameters


def build_model(cfg: Any) -> Any:
    """Random-init float32 model with eager attention and eager (per-expert loop) MoE.

    Eager kernels are plain PyTorch on every device and run in float64, which the runner's
    reference needs (the default grouped_mm experts refuse float64). Where an architecture
    refuses eager attention, it keeps its default.
    """
    import torch
    from transformers import AutoModelForCausalLM

    kwargs = {"dtype": torch.float32, "experts_implementation": "eager"}
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", **kwargs)
    except (ValueError, TypeError):  # this architecture does not offer eager attention
        model = AutoModelForCausalLM.from_config(cfg, **kwargs)
    return model.float()


def random_token_ids(cfg: Any, batch: int, seq: int, seed: int) -> Any:
    """(batch, seq) int64 ids inside the text vocabulary, clear of every special id."""
    import torch

    from torchport.cases.hf_shrink import special_token_ids, text_vocab_size

    vocab = text_vocab_size(cfg)
    special = special_token_ids(cfg)
    allowed = torch.tensor([i for i in range(vocab) if i not in special], dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(len(allowed), (batch, seq), generator=generator)
    return allowed[picks]


def config_dict(cfg: Any) -> dict:
    """The full config as plain JSON types (to_dict can hold tuples or dtypes)."""
    return json.loads(cfg.to_json_string(use_diff=False))


@functools.lru_cache(maxsize=None)
def param_count(model_type: str) -> int:
    """Parameters of the shrunk model, counted on the meta device (for ``torchport cases hf``)."""
    from torchport.cases.hf_shrink import count_params_meta, make_config

    return count_params_meta(make_config(model_type))


def hf_suite() -> list[Case]:
    """One case per entry of transformers' causal-LM mapping, sorted by model type."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return [HFCase(model_type) for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)]
