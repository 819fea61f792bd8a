"""Randomness made comparable between the device and the reference (method ``cpu-masks``).

Training steps run in training mode, so dropout draws random masks; the device's generator and
the CPU's never draw the same ones, and no tolerance can absorb a different mask. During a
*compared* step (the ladder's parity steps, the train probe's loss curves), calls of
``torch.nn.functional.dropout`` / ``dropout1d`` / ``dropout2d`` / ``dropout3d`` with
``training=True`` and ``0 < p < 1`` draw their keep-mask on the CPU, from a generator seeded
by (run seed, call index), and apply it as ``input * mask / (1 - p)`` on the input's device and
dtype. Every side (device, CPU float32, CPU float64; eager and compiled) makes the same calls in
the same order, so each call gets the same mask; the gradient is the same mask scaled.

The same is done for the noise models draw themselves in training mode (MoE router jitter and
Gumbel sampling, input jitter): ``Tensor.uniform_``, ``Tensor.normal_``,
``Tensor.exponential_``, ``torch.rand_like`` and ``torch.randn_like`` without an explicit
generator draw their values on the CPU in float32 from (seed, call index), by torch's own
sampler, and copy them to the tensor's device and dtype. Without this even the CPU disagrees
with itself: a float32 and a float64 draw from one seed are different numbers (phimoe's router
picks other experts).

Also covered: ``torch.bernoulli`` and ``Tensor.bernoulli_`` (uniform draws made as above, kept
where below the probability), ``torch.native_dropout`` and ``torch.dropout`` (masked as
``F.dropout``), and ``F.scaled_dot_product_attention`` with ``dropout_p > 0`` (transformers
passes it in training): computed by PyTorch's documented reference formula (softmax of the
scaled scores, masked, the keep-mask applied to the attention weights, times the values) with
the mask made as above. For compiled graphs Inductor's ``fallback_random`` is on within a
compared step (PyTorch's dynamo benchmark harness does the same for accuracy runs), so a draw
traced into a graph is made as eager makes it.

What this does not cover, recorded so a reader can weigh it:
- the device's own dropout kernel (``native_dropout``) is not in a compared step; it runs, in
  training mode, in the placement, perf and compile passes, which compare no numbers;
- in compile mode each masked call, ``rand_like`` and ``randn_like`` is a graph break (made
  outside the graph); a tensor method (``x.exponential_()``) is a node of the graph, which draws
  from the device's generator: the compared step names it (``traced_draws``) and a parity
  failure says so;
- other random ops (``torch.rand``/``randn`` with a shape, ``multinomial``, ``randperm``) keep
  their generators: ``torch.manual_seed(seed)`` before each compared step makes the CPU
  sides of one dtype agree, and the device too where its random ops run on the CPU generator
  (OpenReg, simdev: ``device_generator`` says which, recorded with the step); a device's own
  generator differs. ``RandomOpWatch`` lists them on the
  reference (``uncontrolled``). A compared step that fails parity while drawing them is judged
  again with its randomness switched off (every module in eval mode, ``Compared.random_off``
  and the reference's ``random_off``), and what still draws then (a ``torch.randn`` that
  ignores ``training``) is drawn on the CPU from (seed, op, call index) on every side
  (``cpu_draws``): the ladder records it (``randomness_off``, ``drawn_on_cpu``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import zlib
from collections.abc import Callable
from typing import Any

METHOD = "cpu-masks"
DESCRIPTION = (
    "dropout masks (F.dropout, native_dropout, SDPA's dropout_p, bernoulli) and in-model noise "
    "(uniform_, normal_, exponential_, rand_like, randn_like) drawn on the CPU in float32 from "
    "(seed, call index), the same on every side; Inductor's fallback_random on; other random "
    "ops only seeded (torch.manual_seed per step)"
)
# Tensor methods filled, and torch functions replaced, by draws made as the masks are.
FILLED = ("uniform_", "normal_", "exponential_")
LIKE = {"rand_like": "uniform_", "randn_like": "normal_"}
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


def _next_generator(counter: str):
    """A CPU generator for the next call, seeded by (run seed, call index); ``counter`` names
    the count it adds to (``masked`` or ``drawn``)."""
    import torch

    index = _state.calls
    _state.calls += 1
    setattr(_state, counter, getattr(_state, counter) + 1)
    return torch.Generator().manual_seed((_state.seed * 1_000_003 + index) % (2**63))


def _keep_mask_impl(shape, p: float, device, dtype):
    """The next call's keep-mask, made outside any graph."""
    import torch

    generator = _next_generator("masked")
    with _inside():
        keep = torch.rand(shape, generator=generator) >= p  # float32 draws on every side
    return keep.to(device=device, dtype=dtype)


def _draw_impl(sampler: str, shape, args, kwargs, device, dtype):
    """The next call's values: ``torch.empty(shape).<sampler>(*args)`` in float32 on the
    call's generator, made outside any graph."""
    import torch

    generator = _next_generator("drawn")
    with _inside():
        values = getattr(torch.empty(shape), sampler)(*args, generator=generator, **kwargs)
    return values.to(device=device, dtype=dtype)


_outside_graphs: dict = {}


def _drawn(sampler: str, like, args=(), kwargs=None):
    """Values for a tensor like ``like`` (its shape, device and dtype), drawn as above."""
    draw = _outside_graph(_draw_impl)
    return draw(sampler, tuple(like.shape), args, kwargs or {}, like.device, like.dtype)


def _outside_graph(fn):
    """``fn`` as torch.compile must call it: a graph break, run eagerly (made once)."""
    if fn not in _outside_graphs:
        import torch

        _outside_graphs[fn] = torch.compiler.disable(fn)
    return _outside_graphs[fn]


def _in_compared_step() -> bool:
    """In a compared step, and not in a call torch makes inside a draw or a traced op (its
    decompositions call the replaced methods too)."""
    return getattr(_state, "active", False) and not making_mask()


def _controlled(tensor) -> bool:
    """A draw this module makes: in a compared step, into a floating tensor."""
    return _in_compared_step() and tensor.is_floating_point()


@contextlib.contextmanager
def _inside():
    _state.making = True
    try:
        yield
    finally:
        _state.making = False


def _traced(tensor) -> bool:
    """A tensor of a compiler's trace (fake or functional), not a value: torch.compile calls a
    tensor method as a graph node, so its draw is the compiled graph's own."""
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:  # a private API that may move: judge by the tensor's type
        return type(tensor).__name__ in ("FakeTensor", "FunctionalTensor")
    return bool(is_fake(tensor))


def _filled(name: str, original):
    @functools.wraps(original)
    def fill(self, *args, generator=None, **kwargs):
        if generator is not None or not _controlled(self):
            return original(self, *args, generator=generator, **kwargs)
        if _traced(self):
            _state.traced.add(f"aten.{name}")
            with _inside():
                return original(self, *args, **kwargs)
        return self.copy_(_drawn(name, self, args, kwargs))

    return fill


def _like(sampler: str, original):
    @functools.wraps(original)
    def like(input, *, dtype=None, device=None, requires_grad=False, **kwargs):
        import torch

        if _in_compared_step() and not _traced(input):
            made = torch.empty_like(input, dtype=dtype, device=device, **kwargs)
            if made.is_floating_point():
                return made.copy_(_drawn(sampler, made)).requires_grad_(requires_grad)
        return original(input, dtype=dtype, device=device, requires_grad=requires_grad, **kwargs)

    return like


def _masked(name: str, original):
    feature_dims = _FEATURE_DIMS.get(name)

    @functools.wraps(original)  # also sets __wrapped__: the original, for nested blocks
    def dropout(input, p=0.5, training=True, inplace=False):
        if not (training and 0.0 < p < 1.0) or not getattr(_state, "active", False):
            return original(input, p, training, inplace)
        shape = tuple(input.shape)
        if feature_dims and len(shape) > feature_dims:  # one draw per channel
            shape = shape[: len(shape) - feature_dims] + (1,) * feature_dims
        scale = _outside_graph(_keep_mask_impl)(shape, p, input.device, input.dtype) / (1.0 - p)
        return input.mul_(scale) if inplace else input * scale

    return dropout


def _bernoulli(name: str, original):
    """``torch.bernoulli(input)`` / ``torch.bernoulli(input, p)``: uniform draws made as the
    masks are, kept where below the probability."""

    @functools.wraps(original)
    def bernoulli(input, *args, generator=None, **kwargs):
        if generator is not None or not _controlled(input) or _traced(input):
            return original(input, *args, generator=generator, **kwargs)
        p = args[0] if args else kwargs.pop("p", input)
        drawn = _drawn("uniform_", input)
        return (drawn < p).to(input.dtype)

    return bernoulli


def _bernoulli_(name: str, original):
    """``Tensor.bernoulli_(p=0.5)``, p a float or a tensor of probabilities."""

    @functools.wraps(original)
    def bernoulli_(self, p=0.5, *, generator=None):
        if generator is not None or not _controlled(self) or _traced(self):
            return original(self, p, generator=generator)
        return self.copy_((_drawn("uniform_", self) < p).to(self.dtype))

    return bernoulli_


def _native_dropout(name: str, original):
    """``torch.native_dropout(input, p, train) -> (output, mask)`` and ``torch.dropout(input,
    p, train) -> output`` with the keep-mask made as ``F.dropout``'s."""

    @functools.wraps(original)
    def native_dropout(input, p, train):
        if not (train and 0.0 < p < 1.0) or not getattr(_state, "active", False):
            return original(input, p, train)
        keep = _outside_graph(_keep_mask_impl)(tuple(input.shape), p, input.device, input.dtype)
        out = input * keep / (1.0 - p)
        return (out, keep.bool()) if name == "native_dropout" else out

    return native_dropout


def _sdpa(name: str, original):
    """``F.scaled_dot_product_attention`` with ``dropout_p > 0``: the documented reference
    formula with the keep-mask made as ``F.dropout``'s, applied to the attention weights.
    q: (..., L, E), k: (..., S, E), v: (..., S, Ev) -> (..., L, Ev)."""

    @functools.wraps(original)
    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        if not (0.0 < dropout_p < 1.0) or not getattr(_state, "active", False):
            return original(query, key, value, attn_mask, dropout_p, is_causal, **kwargs)
        import math

        import torch

        scale = kwargs.get("scale")
        scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
        if kwargs.get("enable_gqa") and key.size(-3) != query.size(-3):
            repeat = query.size(-3) // key.size(-3)
            key = key.repeat_interleave(repeat, -3)
            value = value.repeat_interleave(repeat, -3)
        scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
        length, source = query.size(-2), key.size(-2)
        if is_causal:
            causal = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask
        weights = torch.softmax(scores, dim=-1)
        keep = _outside_graph(_keep_mask_impl)(
            tuple(weights.shape), dropout_p, weights.device, weights.dtype
        )
        return (weights * keep / (1.0 - dropout_p)) @ value

    return sdpa


@contextlib.contextmanager
def inductor_fallback_random():
    """Inductor draws random numbers as eager does (``fallback_random``), where it can be set.
    Only where Inductor's config is already loaded (the ladder loads it when Inductor is the
    backend): importing it here would put seconds of import into a timed compile."""
    import sys

    inductor_config = sys.modules.get("torch._inductor.config")
    try:
        patch = inductor_config.patch(fallback_random=True)
    except Exception:  # not loaded, or a private API that moved: draws stay Inductor's own
        patch = contextlib.nullcontext()
    with patch:
        yield


@contextlib.contextmanager
def comparable(seed: int, *, reset: bool = True):
    """Within: dropout masks and draws as above; ``reset`` restarts the call index (one
    compared step).

    Returns a dict that counts the masked calls (``masked_calls``) and the draws
    (``drawn_calls``) when the block ends, and names the draws a compiler traced into its graph
    (``traced_draws``: they use the device's generator when the graph runs).
    """
    import torch
    import torch.nn.functional as F

    report: dict[str, Any] = {"method": METHOD, "masked_calls": 0, "drawn_calls": 0}
    if reset or not hasattr(_state, "calls"):
        _state.calls = 0
    _state.seed, _state.active, _state.making = seed, True, False
    _state.masked = _state.drawn = 0
    _state.traced = set()
    replaced: list[tuple[Any, str, Callable[[str, Any], Any]]] = [
        *((F, name, _masked) for name in ("dropout", *_FEATURE_DIMS)),
        *((torch.Tensor, name, _filled) for name in FILLED),
        *((torch, name, lambda n, fn: _like(LIKE[n], fn)) for name in LIKE),
        (torch, "bernoulli", _bernoulli),
        (torch.Tensor, "bernoulli_", _bernoulli_),
        (torch, "native_dropout", _native_dropout),
        (torch, "dropout", _native_dropout),
        (F, "scaled_dot_product_attention", _sdpa),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in replaced]
    for (owner, name, wrap), (_, _, fn) in zip(replaced, originals, strict=True):
        setattr(owner, name, wrap(name, getattr(fn, "__wrapped__", fn)))
    if reset:
        torch.manual_seed(seed)
    try:
        with inductor_fallback_random():
            yield report
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)
        _state.active = False
        report["masked_calls"] = _state.masked
        report["drawn_calls"] = _state.drawn
        report["traced_draws"] = sorted(_state.traced)


def device_generator(device: str) -> str:
    """Whose generator a seeded random op on ``device`` draws from, judged by one draw: "cpu"
    for a backend whose random ops run on the CPU generator (OpenReg, simdev): there the random
    ops this layer leaves uncontrolled (``torch.randn`` with a shape, ...) draw the same numbers
    on the device and on the CPU side of one dtype, so seeding makes them comparable; "own"
    for a device generator (CUDA's), where a parity failure with such ops is judged again with
    randomness off. The CPU generator's state is kept."""
    import torch

    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(20_231)
            drawn = torch.randn(16, device=device).cpu()
            torch.manual_seed(20_231)
            cpu = torch.randn(16)
    except Exception as exc:  # a device that cannot draw: said, never guessed
        lines = str(exc).strip().splitlines()
        return f"unknown: a seeded draw on {device} raised {type(exc).__name__}: " + (
            lines[0][:160] if lines else ""
        )
    if torch.equal(drawn, cpu):
        return (
            "cpu: the device's random ops draw from the CPU generator, so seeded draws are "
            "the same on the device and on the CPU side of one dtype"
        )
    return "own: the device's generator draws other numbers than the CPU's for one seed"


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


# -- randomness switched off: the draws eval mode leaves, drawn on the CPU -------------------
OFF_METHOD = "cpu-draws"


def _draw_on_cpu(func, args, kwargs, seed: int):
    """``func`` (a random aten op) computed on the CPU with the CPU generator seeded by
    ``seed``, its floating inputs in float32, and given back as the device call would have
    made it (device, dtype, and in place into ``args[0]`` for an in-place op)."""
    import torch
    from torch.utils._pytree import tree_map

    def where(value):
        return value.device if isinstance(value, torch.Tensor) else None

    devices = [d for d in map(where, [*args, *kwargs.values()]) if d is not None]
    device = kwargs.get("device") or (devices[0] if devices else torch.device("cpu"))

    def to_meta(value):
        return value.to("meta") if isinstance(value, torch.Tensor) else value

    def to_cpu(value):
        if not isinstance(value, torch.Tensor):
            return value
        value = value.detach().to("cpu")
        return value.float() if value.is_floating_point() else value

    # what the call would return on its own device (shapes, dtypes): the op on meta tensors
    meta_kwargs = {
        **tree_map(to_meta, kwargs),
        **({"device": "meta"} if "device" in kwargs else {}),
    }
    try:
        with _inside():  # a draw made here: not one a watch counts
            expected = func(*tree_map(to_meta, args), **meta_kwargs)
    except Exception:  # no meta kernel: floating results take the call's floating dtype
        expected = None
    floats = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    fallback_dtype = kwargs.get("dtype") or (floats[0] if floats else torch.get_default_dtype())
    cpu_kwargs = tree_map(to_cpu, kwargs)
    if "device" in kwargs:
        cpu_kwargs["device"] = "cpu"
    if isinstance(cpu_kwargs.get("dtype"), torch.dtype) and cpu_kwargs["dtype"].is_floating_point:
        cpu_kwargs["dtype"] = torch.float32  # float32 draws on every side
    with _inside(), torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        made = func(*tree_map(to_cpu, args), **cpu_kwargs)

    def back(value, like):
        if not isinstance(value, torch.Tensor):
            return value
        if isinstance(like, torch.Tensor):
            return value.to(device=device, dtype=like.dtype)
        dtype = fallback_dtype if value.is_floating_point() else value.dtype
        return value.to(device=device, dtype=dtype)

    if isinstance(made, (tuple, list)):
        likes = expected if isinstance(expected, (tuple, list)) else [None] * len(made)
        outputs = type(made)(back(v, e) for v, e in zip(made, likes, strict=True))
    else:
        outputs = back(made, expected)
    in_place = func._schema.name.endswith("_") and isinstance(args[0], torch.Tensor)
    if in_place and isinstance(outputs, torch.Tensor):
        with _inside():
            return args[0].copy_(outputs)
    return outputs


class _CpuDraws:
    """Counts what ``cpu_draws`` drew: op name -> calls."""

    def __init__(self):
        from collections import Counter

        self.ops: Counter = Counter()


@contextlib.contextmanager
def cpu_draws(on: bool = True, seed: int = 0):
    """Within (inside ``comparable``): every random aten op the step still draws (``RANDOM_OPS``,
    not a mask or draw made above) is computed on the CPU in float32 with the CPU generator
    seeded by (seed, op, how many calls of that op came before in this block) and copied to the
    call's device and dtype, the same on every side. Counting per op keeps one side's extra
    draw of another op (a device path, a dtype branch) from shifting every later draw. In a
    compiled step the graph's draws are seen where they run through the dispatcher (Inductor's
    ``fallback_random``). Yields what was drawn (``.ops``)."""
    drawn = _CpuDraws()
    if not on:
        yield drawn
        return
    from torch.utils._python_dispatch import TorchDispatchMode

    class CpuDraws(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):  # stay active around compiled code at run time
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = ".".join(str(func).split(".")[:2])  # aten.randn.default -> aten.randn
            if name not in RANDOM_OPS or making_mask() or kwargs.get("generator") is not None:
                return func(*args, **kwargs)
            index = drawn.ops[name]
            drawn.ops[name] += 1
            op_seed = (seed * 1_000_003 + zlib.crc32(name.encode()) * 1_009 + index) % (2**63)
            return _draw_on_cpu(func, args, kwargs, op_seed)

    with CpuDraws():
        yield drawn
