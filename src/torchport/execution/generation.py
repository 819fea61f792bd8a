"""Greedy generation with a KV cache: the steps the ``generate`` scenario runs, times and checks.

A prompt ``(B, P)`` is prefilled in one forward, then ``new_tokens - 1`` decode steps each feed
the last chosen token ``(B, 1)`` back with its position. Tokens, positions and the cache stay on
the device: nothing is read back to the host inside the loop, as in a serving engine.

The cache is transformers' ``StaticCache`` (preallocated to a fixed length: the decode step has
one shape for every prompt length, so a compiled decode step should never recompile) where the
architecture says it supports static shapes (``_can_compile_fullgraph``, the flag transformers'
own ``generate`` reads), else ``DynamicCache`` (grows by concatenation: a new shape per token).
Which one ran is recorded with why (``CachePlan``).

transformers 5.24 renamed the forward's ``past_key_values`` to ``cache``; the keyword is read
from the model's signature, so 5.17 to 5.24+ work the same.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CACHE_KEYWORDS = ("cache", "past_key_values")  # 5.24+, then 5.x before it
# The batches and prompt the ladder's own (parity) generation uses.
PARITY_BATCH = 2


class NotCausalLM(ValueError):
    """A model the generate scenario cannot drive (the result is a ``skip`` with this)."""


def untimed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """A timer that does not time: the parity runs, where no figure is taken."""
    return fn(), 0.0


def cache_keyword(model) -> str:
    """The forward's cache keyword; NotCausalLM when it takes none (not a transformers LM)."""
    params = inspect.signature(model.forward).parameters
    for name in CACHE_KEYWORDS:
        if name in params:
            return name
    raise NotCausalLM(
        f"{type(model).__name__}.forward takes no KV cache ({' or '.join(CACHE_KEYWORDS)}): "
        "generate drives transformers causal LMs"
    )


def check_causal_lm(model) -> None:
    """Raise NotCausalLM unless ``model`` is a transformers causal LM generate can drive."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "get_text_config"):
        raise NotCausalLM(
            f"{type(model).__name__} is not a transformers model (no config): generate needs "
            "a causal LM (token ids in, logits out, a KV cache)"
        )
    if "input_ids" not in inspect.signature(model.forward).parameters:
        raise NotCausalLM(f"{type(model).__name__}.forward takes no input_ids")
    cache_keyword(model)
    can_generate = getattr(model, "can_generate", None)
    if callable(can_generate) and not can_generate():
        raise NotCausalLM(f"{type(model).__name__} cannot generate (transformers says so)")


@dataclass(frozen=True)
class CachePlan:
    """Which KV cache a generation uses, and whether the decode step compiles as one graph."""

    kind: str  # "static" | "dynamic"
    reason: str
    fullgraph: bool

    def to_dict(self) -> dict:
        return {"kind": self.kind, "reason": self.reason, "fullgraph_asked": self.fullgraph}


def cache_plan(model) -> CachePlan:
    """Static where the architecture declares static shapes work, dynamic otherwise."""
    flag = getattr(type(model), "_can_compile_fullgraph", None)
    if flag is None:
        return CachePlan(
            "dynamic",
            "unavailable: transformers' _can_compile_fullgraph flag is missing: DynamicCache",
            False,
        )
    if flag:
        return CachePlan(
            "static", "StaticCache: the architecture declares static shapes (fullgraph)", True
        )
    return CachePlan(
        "dynamic",
        "DynamicCache: the architecture does not declare static-shape support "
        "(_can_compile_fullgraph is False)",
        False,
    )


def new_cache(model, plan: CachePlan, max_len: int):
    """A fresh, empty cache for one generation (``max_len``: prompt + new tokens, static)."""
    from transformers import DynamicCache, StaticCache

    if plan.kind == "static":
        return StaticCache(config=model.config, max_cache_len=max_len)
    return DynamicCache(config=model.config)


def prompt_ids(model, batch: int, length: int, seed: int):
    """(batch, length) int64 token ids inside the vocabulary, clear of special ids (CPU)."""
    from torchport.cases.hf import random_token_ids

    return random_token_ids(model.config, batch, length, seed)


def step_functions(model) -> tuple[Callable, Callable]:
    """(prefill, decode): each ``(ids, positions, cache) -> logits of the last position``.

    Two functions (two code objects) so that a compiler keeps their graphs apart and a
    recompile is attributed to the one that needed it. ids ``(B, T)``, positions ``(1, T)``,
    logits ``(B, vocab)``.
    """
    keyword = cache_keyword(model)

    def prefill(ids, positions, cache):
        out = model(input_ids=ids, position_ids=positions, use_cache=True, **{keyword: cache})
        return out.logits[:, -1, :]

    def decode(ids, positions, cache):
        out = model(input_ids=ids, position_ids=positions, use_cache=True, **{keyword: cache})
        return out.logits[:, -1, :]

    return prefill, decode


@dataclass
class Generated:
    """One greedy generation: tokens ``(B, N)`` and, when kept, the logits each was chosen
    from ``(B, N, vocab)``; the prefill's and every decode step's duration (seconds)."""

    tokens: Any
    logits: Any = None
    prefill_s: float = 0.0
    decode_s: list[float] = field(default_factory=list)


def generate(
    prefill: Callable,
    decode: Callable,
    cache,
    prompt,
    new_tokens: int,
    *,
    timer: Callable[[Callable[[], Any]], tuple[Any, float]] = untimed,
    keep_logits: bool = False,
) -> Generated:
    """Greedy: prefill ``prompt`` (B, P), then ``new_tokens - 1`` decode steps.

    ``timer(fn) -> (value, seconds)`` times each call (``timing.StepTimer`` waits on the
    device before reading the clock). Argmax, the fed-back token and the position stay on
    the device.
    """
    import torch

    with torch.no_grad():
        length = prompt.shape[1]
        positions = torch.arange(length, device=prompt.device).unsqueeze(0)  # (1, P)
        logits, prefill_s = timer(lambda: prefill(prompt, positions, cache))
        chosen, kept, decode_s = [logits.argmax(-1)], [logits], []
        position = positions[:, -1:] + 1  # (1, 1)
        for _ in range(new_tokens - 1):
            ids = chosen[-1].unsqueeze(-1)  # (B, 1)
            logits, seconds = timer(functools.partial(decode, ids, position, cache))
            decode_s.append(seconds)
            chosen.append(logits.argmax(-1))
            if keep_logits:
                kept.append(logits)
            position = position + 1
        return Generated(
            tokens=torch.stack(chosen, dim=1),  # (B, N)
            logits=torch.stack(kept, dim=1) if keep_logits else None,  # (B, N, vocab)
            prefill_s=prefill_s,
            decode_s=decode_s,
        )


def reference_generation(model, *, prompt, new_tokens: int, dtype) -> dict:
    """On the CPU at ``dtype`` (float64 for the reference): tokens and logits, eager."""
    import copy

    model = copy.deepcopy(model).to(device="cpu", dtype=dtype).eval()
    plan = cache_plan(model)
    prefill, decode = step_functions(model)
    cache = new_cache(model, plan, prompt.shape[1] + new_tokens)
    done = generate(prefill, decode, cache, prompt, new_tokens, keep_logits=True)
    return {"tokens": done.tokens, "logits": done.logits, "cache": plan.kind}


class Caches:
    """Caches for repeated generations. A static cache is kept per key (side, batch) and reset
    between generations: its tensors keep their addresses (transformers marks them static), so
    compiled code and CUDA graphs are reused, as a serving engine reuses its cache. A dynamic
    cache is new every time (reset drops its tensors anyway)."""

    def __init__(self, model, plan: CachePlan, max_len: int):
        self.model, self.plan, self.max_len = model, plan, max_len
        self._kept: dict = {}

    def get(self, key):
        if self.plan.kind != "static":
            return new_cache(self.model, self.plan, self.max_len)
        cache = self._kept.get(key)
        if cache is None:
            cache = self._kept[key] = new_cache(self.model, self.plan, self.max_len)
        else:
            cache.reset()
        return cache


@dataclass
class Setup:
    """The placed model ready to generate: its step functions by side ("eager", "compiled")."""

    model: Any
    plan: CachePlan
    caches: Caches
    seed: int
    sides: dict = field(default_factory=dict)  # side -> (prefill, decode)

    def prompt(self, batch: int, length: int):
        """The prompt at (batch, length), on the model's device."""
        device = next(self.model.parameters()).device
        return prompt_ids(self.model, batch, length, self.seed).to(device)

    def run(
        self, side: str, batch: int, length: int, new_tokens: int, *, wrap=None, **kwargs
    ) -> Generated:
        """One generation on ``side``; ``wrap((prefill, decode))`` may wrap the two steps
        (e.g. to count compiles), ``kwargs`` go to ``generate``."""
        prefill, decode = wrap(self.sides[side]) if wrap else self.sides[side]
        cache = self.caches.get((side, batch))
        return generate(prefill, decode, cache, self.prompt(batch, length), new_tokens, **kwargs)

    def decode_step(self, side: str, batch: int, length: int) -> Callable[[], dict]:
        """One decode step after a prefill of ``length`` (for the placement probe): each call
        decodes at the same next position, returning {"logits": (B, vocab)}."""
        import torch

        prefill, decode = self.sides[side]
        cache = self.caches.get((side, batch))
        prompt = self.prompt(batch, length)
        with torch.no_grad():
            positions = torch.arange(length, device=prompt.device).unsqueeze(0)
            token = prefill(prompt, positions, cache).argmax(-1).unsqueeze(-1)  # (B, 1)
        at = positions[:, -1:] + 1

        def step() -> dict:
            with torch.no_grad():
                return {"logits": decode(token, at, cache)}

        return step
