"""Samples made from an ATen overload's schema, for the overloads no OpInfo reaches.

The ``ops`` suite's ``schema/<packet>`` cases (``runner/ops/schema.py``) call each registered
overload of one ATen packet (``aten::add`` -> ``add.Tensor``, ``add.out``, ``add_.Tensor``...)
with inputs made from its schema by a fixed list of argument rules (``ARG_RULES``), on the
device and on the CPU, and judge the device against the CPU (docs/suites/ops.md). A sample
is made for a *plan* (a tensor shape and a dtype): the ladder tries the plans in order
(``plans()``) until the CPU accepts one. An argument no rule covers (a required string, a
``Dimname``, a ``Storage``...) makes no sample: ``NoSample`` says which argument and why.

Nothing here runs an op; torch is imported inside the functions (the suite's catalog reads
the registry, the worker makes the samples).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

# The fixed list of argument rules, as data (docs/suites/ops.md prints it): schema type ->
# what the sample gets. Names refine a rule (``NAME_INTS``, ``NAME_INT_LISTS``, ``INDEX_NAMES``).
ARG_RULES = {
    "Tensor": "a small tensor of the plan's shape and dtype (values in [0.5, 1.5) for floats, "
    "1..3 for integers); index-like names (INDEX_NAMES): int64 in [0, 2); 'mask': bool",
    "Tensor(a!) written, keyword-only (out=)": "an empty tensor of the plan's dtype (index-like "
    "names: int64); the op resizes it",
    "Tensor[]": "a list of 2 tensors of the plan (max_exp_avg_sqs: empty, Adam without amsgrad)",
    "Tensor named lr / scalars": "0-dim / (2,) (one per tensor of a Tensor[]), kept on the "
    "host (HOST_NAMES: _foreach_*'s packed scalars are a CPU tensor by contract)",
    "Tensor named per channel (CHANNEL_NAMES), in the plans that fill": "1-D, the plan's dim 1",
    "Tensor?[]": "a list of one int64 index tensor in [0, 2)",
    "int / SymInt": "by name (NAME_INTS: dim 0, size-like 2, start 0...), otherwise 1; "
    "'dtype' the plan's dtype, 'layout' strided, 'memory_format' contiguous",
    "int[] / SymInt[]": "by name (_Maker.int_list): size-like the plan's shape (a fixed length "
    "N: [2] * N), input_size the plan's shape, stride its contiguous strides beside a size "
    "(as_strided), else 1 each, dims/perm its axes, dim [0], padding [0] * N, repeats "
    "[1] * rank; otherwise [1] * N",
    "float": "0.5 ('eps' 1e-5)",
    "float[]": "[0.5] * N",
    "Scalar": "2",
    "Scalar[]": "[2, 3] (the length of a Tensor[] of 2)",
    "bool": "False ('output_mask' and other bool[]: True)",
    "Device": "the side's device (the device, or the CPU)",
    "str": "by name only (NAME_STRS: rounding_mode 'trunc', reduce 'mean')",
    "optional, no rule for its element (Generator?, str?)": "None",
    "optional, with a default": "the default (None), except a Device: the side's device; "
    "the plans that fill (the second half of plans()) give it a value by its rule (not a dtype, "
    "layout, memory format or generator)",
    "anything else": "no sample (NoSample names the argument): other str, Dimname, Storage, "
    "Generator, Stream, Any",
}
# Plans in the order tried (plans()): shapes first, then the fallback dtypes for ops that
# refuse the case's dtype (integer-only ops, bool ones), then all of it again filling the
# optional arguments.
SHAPES: tuple[tuple[int, ...], ...] = ((2, 3), (3, 3), (3,), (), (2, 3, 4), (1, 2, 4, 4))
FALLBACK_DTYPES = ("int64", "bool")
INDEX_NAMES = frozenset(
    {
        "index",
        "indices",
        "target",
        "offsets",
        "argmax",
        "lengths",
        "input_lengths",
        "target_lengths",
        "per_sample_weights_index",
        "batch_sizes",
    }
)
# In the plans that fill: 1-D, one entry per channel (the plan's dim 1), as batch norm wants.
CHANNEL_NAMES = frozenset(
    {
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "save_mean",
        "save_invstd",
        "save_var",
        "mean",
        "invstd",
        "var",
    }
)
HOST_NAMES = frozenset({"scalars"})  # tensors an op takes on the host beside device ones
SCALAR_TENSOR_NAMES = frozenset({"lr"})  # fused optimizers' tensor_lr: 0-dim
EMPTY_LIST_NAMES = frozenset({"max_exp_avg_sqs"})  # fused Adam without amsgrad: none
SIZE_NAMES = frozenset({"size", "shape", "sizes", "output_size", "new_size", "stride_size"})
NAME_INTS = {
    "dim": 0,
    "dim0": 0,
    "dim1": 1,
    "dim2": 1,
    "start_dim": 0,
    "end_dim": -1,
    "axis": 0,
    "start": 0,
    "end": 2,
    "offset": 0,
    "storage_offset": 0,
    "diagonal": 0,
    "groups": 1,
    "step": 1,
    "n": 2,
    "size": 2,
    "length": 2,
    "steps": 2,
    "num_classes": 2,
    "k": 1,
    "padding_idx": -1,
    "reduction": 1,
}
NAME_STRS = {"rounding_mode": "trunc", "reduce": "mean"}  # the only strings given

# Overloads whose outputs are not determined by their inputs (uninitialised memory): the
# ladder also finds them itself, by running the CPU twice; named here so none is compared
# by value on a lucky first run.
UNINITIALISED = re.compile(r"^_?(new_)?empty|^resize|^_resize|^set_$|^_efficientzerotensor")
# Packets never called: process state, autograd engine, tracing and RNG state
# (docs/suites/ops.md: "schema samples").
NEVER_CALLED = re.compile(
    r"^_?print$|^_assert|^sym_|^_make_dep_token|^_functional_assert|^record_stream$"
    r"|^_backward$|^set_data$|^retains_grad$|^requires_grad_$|^_version$|^output_nr$"
    r"|^_propagate_xla_data|^_test_|^_debug_|^_set_|^_lazy|^_functionalize|^_foobar$"
    r"|^_async_error$|^_set_|^retain_grad$|^_fw_primal|^_make_dual|^_unpack_dual"
)


class NoSample(Exception):
    """No sample for this overload: ``reason`` (a key of ``NO_SAMPLE``) and the detail."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


NO_SAMPLE = {
    "no_rule": "an argument no rule of ARG_RULES covers (a required str, Dimname, Storage...)",
    "never_called": "process state, autograd, tracing or RNG internals (NEVER_CALLED)",
    "no_schema": "the overload's schema cannot be read in this torch",
}


@dataclass
class Sample:
    """One call: positional ``args``, keyword ``kwargs``; ``written`` names the arguments the
    op writes (compared after the call like outputs); ``plan`` says what it was made for."""

    args: list
    kwargs: dict
    written: list[str] = field(default_factory=list)
    plan: str = ""

    def values(self) -> dict[str, Any]:
        """Every argument by name (positional as ``arg<i>``)."""
        named = {f"arg{i}": v for i, v in enumerate(self.args)}
        named.update(self.kwargs)
        return named


def overload_name(name: str) -> tuple[str, str]:
    """``aten::add.out`` -> ("add", "out"); ``aten::sin`` -> ("sin", "default")."""
    packet, _, overload = name.removeprefix("aten::").partition(".")
    return packet, overload or "default"


def schema_of(name: str):
    """The overload's FunctionSchema (``torch.ops.aten.<packet>.<overload>._schema``)."""
    import torch

    packet, overload = overload_name(name)
    try:
        return getattr(getattr(torch.ops.aten, packet), overload)._schema
    except (AttributeError, RuntimeError) as exc:
        raise NoSample("no_schema", f"{name}: {type(exc).__name__}: {exc}") from None


def plans(dtype_name: str) -> list[tuple[tuple[int, ...], str, bool]]:
    """(shape, dtype, fill) in the order tried: ``fill`` also gives the optional arguments
    (``Tensor?``, ``Scalar?``, ``int?``...) a value by their rule (``clamp`` needs a min)."""
    dtypes = [dtype_name] + [d for d in FALLBACK_DTYPES if d != dtype_name]
    return [(shape, d, fill) for fill in (False, True) for d in dtypes for shape in SHAPES]


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return out[::-1]


class _Maker:
    def __init__(self, shape: tuple[int, ...], dtype_name: str, device: str, seed: int, fill: bool):
        import torch

        self.torch, self.fill, self.strided = torch, fill, False
        self.shape, self.dtype_name, self.device = shape, dtype_name, device
        self.dtype = getattr(torch, dtype_name)
        self.gen = torch.Generator().manual_seed(seed)

    def tensor(self, name: str, *, out: bool = False):
        torch = self.torch
        index = name in INDEX_NAMES
        dtype = torch.int64 if index else torch.bool if name == "mask" else self.dtype
        shape = self.shape
        if self.fill and name in CHANNEL_NAMES and shape:  # per-channel vectors (batch norm)
            shape = (shape[1] if len(shape) >= 2 else shape[0],)
        elif name in SCALAR_TENSOR_NAMES:  # a learning rate as a tensor: 0-dim
            shape = ()
        elif name == "scalars":  # _foreach_*'s packed scalars: one per tensor of a Tensor[]
            shape = (2,)

        if out:
            t = torch.empty(0, dtype=dtype)
        elif index:
            t = torch.randint(0, 2, shape, generator=self.gen)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=self.gen).bool()
        elif dtype.is_floating_point or dtype.is_complex:
            t = (torch.rand(shape, generator=self.gen) + 0.5).to(dtype)
        else:
            t = torch.randint(1, 4, shape, generator=self.gen).to(dtype)
        # _foreach_*'s packed scalars are a CPU tensor by contract (the op says so)
        return t if name in HOST_NAMES else t.to(self.device)

    def int_list(self, name: str, n: int | None) -> list[int]:
        rank = len(self.shape)
        if name in SIZE_NAMES:  # a fixed length (upsample's output_size[2]): 2 per entry
            return [2] * n if n else list(self.shape)
        if name == "input_size":
            return list(self.shape)
        if name == "stride":  # as_strided's (beside a size): the plan's; a conv's: 1 each
            return _strides(self.shape) if self.strided else [1] * (n or 1)
        if name in ("dims", "perm"):
            return list(range(rank))
        if name in ("dim", "dims_to_reduce"):
            return [0] if rank else []
        if name in ("padding", "output_padding", "pad"):
            return [0] * (n or 1)
        if name == "repeats":
            return [1] * max(rank, 1)
        return [1] * (n or 1)

    def value(self, name: str, jit_type, n: int | None, *, written: bool, kw: bool):
        torch = self.torch
        kind = jit_type.kind()
        if kind == "OptionalType":  # a rule for the element, else None (Generator?, str?)
            try:
                return self.value(name, jit_type.getElementType(), n, written=written, kw=kw)
            except NoSample:
                return None
        if kind == "TensorType":
            return self.tensor(name, out=written and kw)
        if kind == "ListType":
            element = jit_type.getElementType()
            ekind = element.kind()
            if ekind == "TensorType":
                if name in EMPTY_LIST_NAMES:
                    return []
                return [self.tensor(name), self.tensor(name)]
            if ekind == "OptionalType" and element.getElementType().kind() == "TensorType":
                return [self.tensor("index")]
            if ekind in ("IntType", "SymIntType"):
                return self.int_list(name, n)
            if ekind == "FloatType":
                return [0.5] * (n or 1)
            if ekind == "BoolType":
                return [True] * (n or 1)
            if ekind == "NumberType":
                return [2, 3]
            raise NoSample("no_rule", f"argument '{name}' of type {jit_type}")
        if kind in ("IntType", "SymIntType"):
            if name in ("dtype", "scalar_type"):
                return self.dtype
            if name == "layout":
                return torch.strided
            if name == "memory_format":
                return torch.contiguous_format
            return NAME_INTS.get(name, 1)
        if kind == "FloatType":
            return 1e-5 if name == "eps" else 0.5
        if kind == "NumberType":
            return 2
        if kind == "BoolType":
            return name == "output_mask"
        if kind == "DeviceObjType":
            return torch.device(self.device)
        if kind == "StringType" and name in NAME_STRS:
            return NAME_STRS[name]
        raise NoSample("no_rule", f"argument '{name}' of type {jit_type}")


NOT_FILLED = frozenset({"dtype", "scalar_type", "layout", "memory_format", "generator"})


def _fillable(a) -> bool:
    """An optional argument ``fill`` gives a value: its rule exists and is not a choice of
    dtype, layout, memory format or generator (those stay the default)."""
    kind = a.type.kind()
    if kind != "OptionalType" or a.name in NOT_FILLED:
        return False
    return a.type.getElementType().kind() in (
        "TensorType",
        "IntType",
        "SymIntType",
        "FloatType",
        "NumberType",
        "BoolType",
        "ListType",
    )


def make(
    schema,
    shape: tuple[int, ...],
    dtype_name: str,
    device: str,
    seed: int = 0,
    fill: bool = False,
) -> Sample:
    """A sample for ``schema`` with tensors of ``shape`` and ``dtype_name`` on ``device``
    (the same ``seed`` makes the same values on every side), or ``NoSample``. ``fill``: the
    optional arguments get values too (``_fillable``)."""
    name = schema.name.removeprefix("aten::")
    if NEVER_CALLED.search(name):
        raise NoSample("never_called", schema.name)
    maker = _Maker(shape, dtype_name, device, seed, fill)
    arguments = list(schema.arguments)
    maker.strided = any(a.name == "size" for a in arguments)
    positional = [a for a in arguments if not a.kwarg_only]
    # positional arguments up to the last one without a default; defaults before it are given
    last = max(
        (
            i
            for i, a in enumerate(positional)
            if not a.has_default_value() or (fill and _fillable(a))
        ),
        default=-1,
    )
    sample = Sample(
        args=[], kwargs={}, plan=f"{dtype_name}{list(shape)}" + (" filled" if fill else "")
    )
    for i, a in enumerate(arguments):
        written = bool(a.alias_info is not None and a.alias_info.is_write)
        if written:
            sample.written.append(a.name if a.kwarg_only else f"arg{i}")
        is_device = a.type.kind() == "DeviceObjType" or (
            a.type.kind() == "OptionalType" and a.type.getElementType().kind() == "DeviceObjType"
        )
        if a.kwarg_only:
            if a.has_default_value() and not is_device and not (fill and _fillable(a)):
                continue
            sample.kwargs[a.name] = maker.value(a.name, a.type, a.N, written=written, kw=True)
        elif i <= last:  # (a default's value is never read: reading some crashes torch)
            sample.args.append(maker.value(a.name, a.type, a.N, written=written, kw=False))
    return sample


def uninitialised(name: str) -> bool:
    return bool(UNINITIALISED.search(overload_name(name)[0]))


@functools.cache
def registered() -> tuple[str, ...]:
    """Every ``aten::`` overload the dispatcher lists (``_dispatch_get_all_op_names``), or
    the JIT schemas' when that is unavailable."""
    import torch

    try:
        names = torch._C._dispatch_get_all_op_names()
    except (AttributeError, RuntimeError):
        names = [
            s.name + (f".{s.overload_name}" if s.overload_name else "")
            for s in torch._C._jit_get_all_schemas()
        ]
    return tuple(sorted(n for n in names if n.startswith("aten::")))


def _has(name: str, key: str) -> bool:
    import torch

    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))
    except (AttributeError, RuntimeError):
        return False


def callable_here(name: str) -> bool:
    """An overload a schema case calls: not decomposed above every backend (composite
    implicit), not of an excluded family (``ops_reasons.family_exclusion``), and with a CPU
    kernel or a composite to compare against."""
    from torchport.cases.ops_reasons import family_exclusion

    if family_exclusion(name) is not None or _has(name, "CompositeImplicitAutograd"):
        return False
    return _has(name, "CPU") or any(
        _has(name, k)
        for k in ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
    )


@functools.cache
def packets() -> dict[str, tuple[str, ...]]:
    """ATen packet -> its overloads a schema case calls (``callable_here``), by name."""
    found: dict[str, list[str]] = {}
    for name in registered():
        if callable_here(name):
            found.setdefault(overload_name(name)[0], []).append(name)
    return {p: tuple(v) for p, v in sorted(found.items())}
