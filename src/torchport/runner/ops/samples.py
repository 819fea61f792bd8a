"""Running one OpInfo sample on one side (device, CPU at the dtype, CPU float64).

A side is the same sample with its tensors converted (``convert``): leaves stay leaves with the
same ``requires_grad``, tensors used twice stay one tensor, and devices named in arguments follow
the tensors. ``forward`` (op + OpInfo's ``output_process_fn_grad``) and ``backward`` (fixed random
cotangents) are separate so that the device side can be recorded phase by phase with the
cotangents made outside the recorder; errors are returned as data, never raised.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# aten tags that say what kind of op ran (read from the ops the device side dispatched).
RANDOM_TAG = "nondeterministic_seeded"
SHAPE_TAGS = ("dynamic_output_shape", "data_dependent_output")


@dataclass
class Side:
    live: dict | None = None  # name -> output where the op made it
    live_grads: dict | None = None  # "grad.<input>" -> gradient where it was made
    outputs: dict | None = None  # name -> tensor (on the CPU) or Python value
    grads: dict | None = None  # "grad.<input>" -> tensor (on the CPU) or None
    forward_error: BaseException | None = None
    backward_error: BaseException | None = None
    cotangents: list | None = None  # CPU tensors the device side used, for the others
    sparse: bool = False  # the op returned a sparse (non-strided) tensor


def convert(sample, tensor_fn, device_fn=lambda d: d):
    """A copy of a SampleInput with ``tensor_fn`` applied to every tensor (once per tensor)."""
    import torch
    from torch.testing._internal.opinfo.core import SampleInput

    memo: dict[int, object] = {}

    def walk(value):
        if isinstance(value, torch.Tensor):
            if id(value) not in memo:
                memo[id(value)] = tensor_fn(value)
            return memo[id(value)]
        if isinstance(value, (torch.device, str)):
            return device_fn(value)
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
            return type(value)(*map(walk, value))
        if isinstance(value, (list, tuple)):
            return type(value)(map(walk, value))
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    with torch.no_grad():
        return SampleInput(
            walk(sample.input),
            args=walk(sample.args),
            kwargs=walk(sample.kwargs),
            output_process_fn_grad=sample.output_process_fn_grad,
            broadcasts_input=sample.broadcasts_input,
            name=sample.name,
        )


def leaf(t, device=None, dtype=None):
    """``t`` detached, moved/cast, a leaf with the same ``requires_grad`` and the same memory
    layout: a view with an offset, gaps or overlaps (OpInfo's partial views, expanded inputs)
    is copied with its whole storage and viewed the same way, so an op that reads storage
    outside the view (as_strided) sees the same bytes on both sides. ``.to()`` alone would
    make it dense."""
    grad, t = t.requires_grad, t.detach()
    elements = t.untyped_storage().nbytes() // max(t.element_size(), 1)
    # copy=True: a side never shares memory with another (ops may write into their inputs)
    if t.is_contiguous() and t.storage_offset() == 0 and elements == t.numel():
        out = t.to(device=device, dtype=dtype, copy=True)
    else:
        whole = t.as_strided((elements,), (1,), 0).to(device=device, dtype=dtype, copy=True)
        out = whole.as_strided(t.size(), t.stride(), t.storage_offset())
    return out.requires_grad_(grad) if (out.is_floating_point() or out.is_complex()) else out


def wider(dtype):
    """float64 for floating dtypes, complex128 for complex ones, else None (keep)."""
    import torch

    if dtype.is_complex:
        return torch.complex128
    return torch.float64 if dtype.is_floating_point else None


def named_tensors(sample) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) for every tensor of a sample: input, args.0, kwargs.weight, args.1.0..."""
    import torch

    found = []

    def walk(value, name):
        if isinstance(value, torch.Tensor):
            found.append((name, value))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{name}.{i}")
        elif isinstance(value, dict):
            for k, item in value.items():
                walk(item, f"{name}.{k}")

    walk(sample.input, "input")
    walk(list(sample.args), "args")
    walk(sample.kwargs, "kwargs")
    return found


def non_strided(sample, outputs: dict | None = None) -> bool:
    import torch

    tensors = [t for _, t in named_tensors(sample)]
    tensors += [v for v in (outputs or {}).values() if isinstance(v, torch.Tensor)]
    return any(t.layout != torch.strided or t.is_nested for t in tensors)


def flatten(value, prefix: str = "out") -> dict:
    """Named leaves of an op's output: tensors and Python values (None dropped)."""
    import torch

    if value is None:
        return {}
    if isinstance(value, torch.Tensor):
        return {prefix: value}
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        found = {}
        for i, item in enumerate(value):
            found.update(flatten(item, f"{prefix}.{i}"))
        return found
    if isinstance(value, dict):
        found = {}
        for k, item in value.items():
            found.update(flatten(item, f"{prefix}.{k}"))
        return found
    return {prefix: value}


def read_back(t):
    """``t`` on the CPU. A lazy conjugate (or negative) view is read with its bit undone on the
    device and redone on the host: materialising it is the backend's transfer, not the op
    under test (simdev recurses until it crashes on it)."""
    import torch

    t = t.detach()
    if t.is_conj():
        return t.conj().to("cpu").conj().resolve_conj()
    if t.is_neg():
        return torch._neg_view(torch._neg_view(t).to("cpu")).resolve_neg()
    return t.to("cpu")


def to_host(values: dict) -> dict:
    import torch

    return {k: read_back(v) if isinstance(v, torch.Tensor) else v for k, v in values.items()}


def forward(op, sample) -> Side:
    """The op on one sample, then OpInfo's output processing; outputs stay where they are."""
    import torch

    side = Side()
    try:
        raw = op(sample.input, *sample.args, **sample.kwargs)
        side.sparse = any(
            isinstance(v, torch.Tensor) and (v.layout != torch.strided or v.is_nested)
            for v in flatten(raw).values()
        )
        side.live = flatten(sample.output_process_fn_grad(raw))
    except Exception as exc:
        side.forward_error = exc
    return side


def differentiable(side: Side, sample) -> tuple[list, list]:
    """(inputs that require grad as (name, tensor), outputs that require grad)."""
    import torch

    inputs = [(n, t) for n, t in named_tensors(sample) if t.requires_grad]
    outs = [
        v for v in (side.live or {}).values() if isinstance(v, torch.Tensor) and v.requires_grad
    ]
    return inputs, outs


def cotangents(side: Side, sample, seed: int) -> list | None:
    """Fixed random cotangents (CPU) shaped like the differentiable outputs, or None when
    there is nothing to differentiate. Random rather than ones: ones hide errors that sum to
    zero (softmax backward). Made outside any recorder: they are not the op's work."""
    import torch

    inputs, outs = differentiable(side, sample)
    if not inputs or not outs:
        return None
    gen = torch.Generator().manual_seed(seed)
    made = []
    for out in outs:
        base = torch.complex64 if out.is_complex() else torch.float32
        made.append(torch.randn(out.shape, generator=gen, dtype=base).to(out.dtype))
    return made


def placed_cotangents(side: Side, sample, cots: list) -> list:
    """``cots`` moved and cast to the differentiable outputs' devices and dtypes."""
    _, outs = differentiable(side, sample)
    return [c.to(device=o.device, dtype=o.dtype) for c, o in zip(cots, outs, strict=False)]


def backward(side: Side, sample, cots: list) -> None:
    """Gradients of the differentiable outputs against ``cots`` (cast here if they are not)."""
    import torch

    inputs, outs = differentiable(side, sample)
    try:
        cots = placed_cotangents(side, sample, cots)
        grads = torch.autograd.grad(outs, [t for _, t in inputs], cots, allow_unused=True)
    except Exception as exc:
        side.backward_error = exc
        return
    side.live_grads = {f"grad.{n}": g for (n, _), g in zip(inputs, grads, strict=True)}


def to_host_side(side: Side) -> Side:
    """Outputs and gradients read back to the CPU (after the recorded window)."""
    if side.live is not None:
        side.outputs = to_host(side.live)
    if side.live_grads is not None:
        side.grads = {
            k: (read_back(v) if v is not None else None) for k, v in side.live_grads.items()
        }
    return side


def run_side(op, sample, *, backward_with: list | None, seed: int, grad: bool) -> Side:
    """A CPU side in one go: forward, and backward when ``grad`` (with the device's cotangents
    when it made some, else fresh ones)."""
    side = forward(op, sample)
    if grad and side.forward_error is None:
        cots = backward_with if backward_with is not None else cotangents(side, sample, seed)
        if cots is not None:
            backward(side, sample, cots)
    return to_host_side(side)


@functools.cache
def op_tags(name: str) -> frozenset[str]:
    """The aten tags of an op recorded as ``aten.bernoulli_.float`` (empty if unknown)."""
    import torch

    namespace, _, rest = name.partition(".")
    packet, _, overload = rest.partition(".")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")
    except (AttributeError, RuntimeError):
        return frozenset()
    return frozenset(str(tag).rsplit(".", 1)[-1] for tag in getattr(op, "tags", ()))
