"""Randomness made comparable between the device and the reference (method ``cpu-masks``).

Training steps run in training mode, so dropout draws random masks; the device's generator and
the CPU's never draw the same ones, and no tolerance can absorb a different mask. During a
*compared* step (the ladder's parity steps, the train probe's loss curves), calls of
``torch.nn.functional.dropout`` / ``dropout1d`` / ``dropout2d`` / ``dropout3d`` with
``training=True`` and ``0 < p < 1`` draw their keep-mask on the CPU, from a generator seeded
by (run seed, call index), and apply it as ``input * mask / (1 - p)`` on the input's device and
dtype. Every side (device, CPU float32, CPU float64; eager and compiled) makes the same calls in
the same order, so each call gets the same mask; the gradient is the same mask scaled.

What this does not cover, recorded so a reader can weigh it:
- the device's own dropout kernel (``native_dropout``) is not in a compared step; it runs, in
  training mode, in the placement, perf and compile passes, which compare no numbers;
- in compile mode each masked call is a graph break (the mask is made outside the graph);
- other random ops (``torch.rand`` in a model, SDPA's ``dropout_p``) keep their generators:
  ``torch.manual_seed(seed)`` before each compared step makes the CPU sides agree, but a
  device's generator differs. ``RandomOpWatch`` lists them on the reference (``uncontrolled``).
"""

from __future__ import annotations

import contextlib
import functools
import threading

METHOD = "cpu-masks"
DESCRIPTION = (
    "dropout masks drawn on the CPU from (seed, call index) and applied identically "
    "on every side; other random ops only seeded (torch.manual_seed per step)"
)
# Random ops the generator feeds (packets). Masks made here are not counted.
RANDOM_OPS = frozenset(
    f"aten.{n}"
    for n in (
        "bernoulli",
        "bernoulli_",
        "native_dropout",
        "rand",
        "rand_like",
        "randn",
        "randn_like",
        "randint",
        "randint_like",
        "randperm",
        "normal",
        "normal_",
        "uniform_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
        "random_",
        "multinomial",
        "_fused_dropout",
        "poisson",
        "rrelu_with_noise",
        "_standard_gamma",
    )
)
_FEATURE_DIMS = {"dropout1d": 1, "dropout2d": 2, "dropout3d": 3}
_state = threading.local()


def _keep_mask_impl(shape, p: float, device, dtype):
    """The next call's keep-mask: CPU generator, (seed, call index); made outside any graph."""
    import torch

    index = _state.calls
    _state.calls += 1
    _state.masked += 1
    generator = torch.Generator().manual_seed((_state.seed * 1_000_003 + index) % (2**63))
    _state.making = True
    try:
        keep = torch.rand(shape, generator=generator) >= p  # float32 draws on every side
    finally:
        _state.making = False
    return keep.to(device=device, dtype=dtype)


_keep_mask = None


def _mask_fn():
    global _keep_mask
    if _keep_mask is None:
        import torch

        _keep_mask = torch.compiler.disable(_keep_mask_impl)
    return _keep_mask


def _masked(name: str, original):
    feature_dims = _FEATURE_DIMS.get(name)

    @functools.wraps(original)  # also sets __wrapped__: the original, for nested blocks
    def dropout(input, p=0.5, training=True, inplace=False):
        if not (training and 0.0 < p < 1.0) or not getattr(_state, "active", False):
            return original(input, p, training, inplace)
        shape = tuple(input.shape)
        if feature_dims and len(shape) > feature_dims:  # one draw per channel
            shape = shape[: len(shape) - feature_dims] + (1,) * feature_dims
        scale = _mask_fn()(shape, p, input.device, input.dtype) / (1.0 - p)
        return input.mul_(scale) if inplace else input * scale

    return dropout


@contextlib.contextmanager
def comparable(seed: int, *, reset: bool = True):
    """Within: dropout masks as above; ``reset`` restarts the call index (one compared step).

    Returns a dict that counts the masked calls (``masked``) when the block ends.
    """
    import torch
    import torch.nn.functional as F

    report = {"method": METHOD, "masked_calls": 0}
    if reset or not hasattr(_state, "calls"):
        _state.calls = 0
    _state.seed, _state.masked, _state.active, _state.making = seed, 0, True, False
    originals = {name: getattr(F, name) for name in ("dropout", *_FEATURE_DIMS)}
    for name, fn in originals.items():
        setattr(F, name, _masked(name, getattr(fn, "__wrapped__", fn)))
    if reset:
        torch.manual_seed(seed)
    try:
        yield report
    finally:
        for name, fn in originals.items():
            setattr(F, name, fn)
        _state.active = False
        report["masked_calls"] = _state.masked


def making_mask() -> bool:
    return bool(getattr(_state, "making", False))


def watch_random_ops():
    """A dispatch mode that lists random ops not made comparable (the masks made here are
    left out): ``with watch_random_ops() as seen: step()`` then ``seen.ops``."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    class RandomOpWatch(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = ".".join(str(func).split(".")[:2])  # aten.rand.default -> aten.rand
            if name in RANDOM_OPS and not making_mask():
                self.ops[name] += 1
            return func(*args, **(kwargs or {}))

    return RandomOpWatch()
