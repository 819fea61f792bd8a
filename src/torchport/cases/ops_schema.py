"""Samples made from an ATen overload's schema, for the overloads no OpInfo reaches.

The ``ops`` suite's ``schema/<packet>`` cases (``runner/ops/schema.py``) call each registered
overload of one ATen packet (``aten::add`` -> ``add.Tensor``, ``add.out``, ``add_.Tensor``...)
with inputs made from its schema by a fixed list of argument rules (``ARG_RULES``), on the
device and on the CPU, and judge the device against the CPU (docs/suites/ops.md). A sample
is made for a *plan* (a tensor shape and a dtype): the ladder tries the plans in order
(``plans()``) until the CPU accepts one. An argument no rule covers (a required string, a
``Dimname``, a ``Storage``...) makes no sample: ``NoSample`` says which argument and why.

Nothing here runs an op but on the meta device (the out= dtypes, ``_out_dtypes``); torch is
imported inside the functions (the suite's catalog reads
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
    "1..3 for integers); index-like names (INDEX_NAMES): int64 in [0, 2); 'mask': bool; "
    "'p': in [0, 1) (a probability); 'value': 0-dim; 'pivots': int32 1..n (LAPACK's)",
    "Tensor(a!) written, keyword-only (out=)": "an empty tensor of the dtype the overload's "
    "functional sibling returns for the same inputs, asked of the meta device (isin.out: bool, "
    "linalg_lu_factor_ex.out's pivots: int32); where that cannot be learnt the plan's dtype "
    "(index-like names: int64); the op resizes it",
    "Tensor[]": "a list of 2 tensors of the plan (max_exp_avg_sqs: empty, Adam without amsgrad)",
    "Tensor named lr / scalars": "0-dim / (2,) (one per tensor of a Tensor[]), kept on the "
    "host (HOST_NAMES: _foreach_*'s packed scalars are a CPU tensor by contract)",
    "Tensor named per channel (CHANNEL_NAMES), in the plans that fill": "1-D, the plan's dim 1",
    "Tensor?[]": "a list of one int64 index tensor in [0, 2)",
    "int / SymInt": "by name (NAME_INTS: dim 0, size-like 2, start 0...), otherwise 1; "
    "'dtype' (and 'input_dtype') the plan's dtype, 'layout' strided, 'memory_format' contiguous",
    "int[] / SymInt[]": "by name (_Maker.int_list): size-like the plan's shape (a fixed length "
    "N: [2] * N), input_size the plan's shape, stride its contiguous strides beside a size "
    "(as_strided), else 1 each, dims/perm its axes, dim [0], padding [0] * N, repeats "
    "[1] * rank, pad [1, 1], physical_layout the axes, split_sizes [1, dim 0 - 1]; "
    "otherwise [1] * N",
    "float": "0.5 ('eps' 1e-5)",
    "float[]": "[0.5] * N",
    "Scalar": "2",
    "Scalar[]": "[2, 3] (the length of a Tensor[] of 2)",
    "bool": "False ('output_mask' and other bool[]: True)",
    "Device": "the side's device (the device, or the CPU)",
    "str": "by name only (NAME_STRS: rounding_mode 'trunc', reduce 'mean', assert_msg; "
    "scatter's reduce 'add', PACKET_STRS)",
    "Storage": "the untyped storage of a tensor of the plan, on the side's device",
    "optional, no rule for its element (Generator?, str?)": "None",
    "optional, with a default": "the default (None), except a Device: the side's device; "
    "the plans that fill (the second half of plans()) give it a value by its rule (not a dtype, "
    "layout, memory format or generator)",
    "anything else": "no sample (NoSample names the argument): other str, Dimname, "
    "Generator, Stream, Any",
    "a family plan (cases/ops_schema_plans.py)": "after the general plans, for the packets "
    "of a family (convolutions, upsampling, pooling, losses, embedding bags, attention, "
    "batched matmul, LU...): the shapes and values its arguments agree on, by name",
}
# Plans in the order tried (plans()): shapes first, then the fallback dtypes for ops that
# refuse the case's dtype (integer-only ops, bool ones), then all of it again filling the
# optional arguments.
SHAPES: tuple[tuple[int, ...], ...] = ((2, 3), (3, 3), (3,), (), (2, 3, 4), (1, 2, 4, 4))
FALLBACK_DTYPES = ("int64", "bool", "complex64")  # complex64 last: complex-only ops
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
    "low": 0,  # randint's [low, high), random_'s [from, to): a range that is not empty
    "high": 3,
    "from": 0,
    "to": 3,
    "min": 0,  # _functional_sym_constrain_range's [min, max] around a size of 2
    "max": 3,
    "ignore_index": -100,
}
# the only strings given (an assertion's message: _assert_async.msg, _assert_scalar)
NAME_STRS = {"rounding_mode": "trunc", "reduce": "mean", "assert_msg": "schema sample"}
PACKET_STRS = {("scatter", "reduce"): "add", ("scatter_", "reduce"): "add"}  # add | multiply
PROB_NAMES = frozenset({"p"})  # bernoulli's probabilities: in [0, 1)
ZERO_DIM_NAMES = frozenset({"value"})  # index_fill's, masked_fill's value tensor: 0-dim
PIVOT_NAMES = frozenset({"pivots", "LU_pivots"})  # int32 1..n over the last dim

# Overloads whose outputs are not determined by their inputs (uninitialised memory): the
# ladder also finds them itself, by running the CPU twice; named here so none is compared
# by value on a lucky first run.
UNINITIALISED = re.compile(r"^_?(new_)?empty|^resize|^_resize|^set_$|^_efficientzerotensor")
# Packets never called: process state, autograd engine, tracing and RNG state
# (docs/suites/ops.md: "schema samples").
NEVER_CALLED = re.compile(
    r"^_?print$|^sym_|^_make_dep_token|^record_stream$"
    r"|^_backward$|^set_data$|^retains_grad$|^requires_grad_$|^_version$|^output_nr$"
    r"|^_propagate_xla_data|^_debug_|^_set_|^_functionalize"
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


def plans_for(name: str, dtype_name: str) -> list[tuple[tuple[int, ...], str, bool, Any]]:
    """The plans tried for overload ``name``: the general ones (``plans``), then its family's
    (``ops_schema_plans.FAMILY_PLANS``) at the case's dtype: (shape, dtype, fill, family plan
    or None)."""
    from torchport.cases.ops_schema_plans import family_plans

    general = [(shape, d, fill, None) for shape, d, fill in plans(dtype_name)]
    family = [(fp.shape, dtype_name, False, fp) for fp in family_plans(overload_name(name)[0])]
    return general + family


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return out[::-1]


class _Maker:
    def __init__(
        self,
        shape: tuple[int, ...],
        dtype_name: str,
        device: str,
        seed: int,
        fill: bool,
        family: dict | None = None,
        packet: str = "",
    ):
        import torch

        self.torch, self.fill, self.strided = torch, fill, False
        self.shape, self.dtype_name, self.device = shape, dtype_name, device
        self.dtype = getattr(torch, dtype_name)
        self.gen = torch.Generator().manual_seed(seed)
        self.family, self.packet = family or {}, packet

    def tensor(self, name: str, *, out: bool = False, shape: tuple[int, ...] | None = None):
        torch = self.torch
        index = name in INDEX_NAMES
        dtype = torch.int64 if index else torch.bool if name == "mask" else self.dtype
        given = shape is not None
        shape = self.shape if shape is None else shape
        if given:
            pass  # a family plan's shape, as it says
        elif self.fill and name in CHANNEL_NAMES and shape:  # per-channel vectors (batch norm)
            shape = (shape[1] if len(shape) >= 2 else shape[0],)
        elif name in SCALAR_TENSOR_NAMES or name in ZERO_DIM_NAMES:  # lr, fill value: 0-dim
            shape = ()
        elif name == "scalars":  # _foreach_*'s packed scalars: one per tensor of a Tensor[]
            shape = (2,)

        if out:
            t = torch.empty(0, dtype=dtype)
        elif name in PIVOT_NAMES:  # LAPACK's pivots: 1..n over the last dim, no row swapped
            k = shape[-1] if shape else 1
            if not given and len(shape) >= 2:
                shape = shape[:-1]
            t = torch.arange(1, k + 1, dtype=torch.int32).expand(*shape[:-1], k).contiguous()
        elif index:
            t = torch.randint(0, 2, shape, generator=self.gen)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=self.gen).bool()
        elif name in PROB_NAMES and dtype.is_floating_point:
            t = torch.rand(shape, generator=self.gen).to(dtype)
        elif dtype.is_floating_point or dtype.is_complex:
            t = (torch.rand(shape, generator=self.gen) + 0.5).to(dtype)
        else:
            t = torch.randint(1, 4, shape, generator=self.gen).to(dtype)
        # _foreach_*'s packed scalars are a CPU tensor by contract (the op says so)
        return t if name in HOST_NAMES else t.to(self.device)

    def spec(self, name: str, spec):
        """A family plan's value for argument ``name`` (cases/ops_schema_plans.py)."""
        from torchport.cases.ops_schema_plans import T

        torch = self.torch
        if isinstance(spec, tuple):
            return self.tensor(name, shape=spec)
        if isinstance(spec, list) and spec and isinstance(spec[0], T):
            return [self.spec(name, s) for s in spec]
        if not isinstance(spec, T):
            return list(spec) if isinstance(spec, list) else spec
        dtype = (
            self.dtype
            if spec.dtype == "plan"
            else getattr(torch, spec.dtype)
            if spec.dtype
            else None
        )
        if spec.kind == "plan":
            t = self.tensor(name, shape=spec.shape)
            return t.to(dtype) if dtype is not None else t
        if spec.kind == "index":
            t = torch.randint(0, spec.high, spec.shape, generator=self.gen)
        elif spec.kind == "prob":
            t = torch.rand(spec.shape, generator=self.gen).to(dtype or self.dtype)
        elif spec.kind == "unit":
            t = (torch.rand(spec.shape, generator=self.gen) * 2 - 1).to(dtype or self.dtype)
        elif spec.kind == "zeros":
            t = torch.zeros(spec.shape, dtype=dtype or self.dtype)
        elif spec.kind == "pivots":
            t = torch.arange(1, spec.shape[-1] + 1, dtype=torch.int32).expand(spec.shape)
            t = t.contiguous()
        elif spec.kind == "values":
            t = torch.tensor(spec.values, dtype=dtype or torch.int64).reshape(spec.shape)
        else:
            raise ValueError(f"family plan: unknown tensor kind {spec.kind!r} for '{name}'")
        return t if spec.host else t.to(self.device)

    def int_list(self, name: str, n: int | None) -> list[int]:
        rank = len(self.shape)
        if name in SIZE_NAMES:  # a fixed length (upsample's output_size[2]): 2 per entry
            return [2] * n if n else list(self.shape)
        if name == "input_size":
            return list(self.shape)
        if name == "stride":  # as_strided's (beside a size): the plan's; a conv's: 1 each
            return _strides(self.shape) if self.strided else [1] * (n or 1)
        if name in ("dims", "perm", "physical_layout"):
            return list(range(rank))
        if name in ("dim", "dims_to_reduce"):
            return [0] if rank else []
        if name in ("padding", "output_padding"):
            return [0] * (n or 1)
        if name == "pad":  # constant_pad_nd: one before and one after the last dim
            return [1, 1]
        if name == "split_sizes":  # two pieces of dim 0
            first = self.shape[0] if rank else 1
            return [1, first - 1] if first > 1 else [first]
        if name == "repeats":
            return [1] * max(rank, 1)
        return [1] * (n or 1)

    def value(self, name: str, jit_type, n: int | None, *, written: bool, kw: bool):
        torch = self.torch
        if name in self.family and not (written and kw):
            return self.spec(name, self.family[name])
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
            if name in ("dtype", "scalar_type", "input_dtype"):
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
        if kind == "StringType" and (self.packet, name) in PACKET_STRS:
            return PACKET_STRS[(self.packet, name)]
        if kind == "StringType" and name in NAME_STRS:
            return NAME_STRS[name]
        if kind == "StorageType":  # set_'s source: a storage of the plan on the side's device
            return self.tensor(name).untyped_storage()
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


def _written(a) -> bool:
    return bool(a.alias_info is not None and a.alias_info.is_write)


def functional_sibling(name: str) -> str | None:
    """The functional overload an out= overload writes the result of: the same packet, the
    same arguments without the keyword-only written ones, nothing written (``isin.Tensor_
    Tensor_out`` -> ``aten::isin.Tensor_Tensor``); None where there is none (or the schemas
    cannot be read)."""
    import torch

    packet, _, overload = name.partition(".")
    try:
        schemas = {s.overload_name: s for s in torch._C._jit_get_schemas_for_operator(packet)}
    except (AttributeError, RuntimeError):
        return None
    own = schemas.get(overload)
    if own is None:
        return None
    written = [a for a in own.arguments if _written(a)]
    if not written or not all(a.kwarg_only for a in written):
        return None
    wanted = tuple((a.name, str(a.type)) for a in own.arguments if not _written(a))
    for other, schema in schemas.items():
        if other != overload and tuple((a.name, str(a.type)) for a in schema.arguments) == wanted:
            return packet + (f".{other}" if other else "")
    return None


def _out_dtypes(schema, sample: Sample, outs: list[str]) -> list | None:
    """The dtypes the functional sibling returns for ``sample``'s inputs, asked of the meta
    device (no values computed), one per out= tensor in ``outs``; None where it cannot say."""
    import torch

    own = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    sibling = functional_sibling(own)
    if sibling is None:
        return None

    def meta(v):
        if isinstance(v, torch.Tensor):
            return v.to("meta")
        if isinstance(v, list):
            return [meta(x) for x in v]
        if isinstance(v, torch.device):
            return torch.device("meta")
        return v

    packet, _, over = sibling.removeprefix("aten::").partition(".")
    try:
        op = getattr(getattr(torch.ops.aten, packet), over or "default")
        kwargs = {k: meta(v) for k, v in sample.kwargs.items() if k not in outs}
        got = op(*[meta(a) for a in sample.args], **kwargs)
    except Exception:  # no meta kernel, or the meta kernel refuses: the plan's dtype stays
        return None
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    if len(got) != len(outs) or not all(isinstance(t, torch.Tensor) for t in got):
        return None
    return [t.dtype for t in got]


def make(
    schema,
    shape: tuple[int, ...],
    dtype_name: str,
    device: str,
    seed: int = 0,
    fill: bool = False,
    family=None,
) -> Sample:
    """A sample for ``schema`` with tensors of ``shape`` and ``dtype_name`` on ``device``
    (the same ``seed`` makes the same values on every side), or ``NoSample``. ``fill``: the
    optional arguments get values too (``_fillable``); ``family``: a family plan
    (``ops_schema_plans.FamilyPlan``), whose arguments are always given, as it says."""
    name = schema.name.removeprefix("aten::")
    if NEVER_CALLED.search(name):
        raise NoSample("never_called", schema.name)
    given = dict(family.args) if family is not None else {}
    maker = _Maker(shape, dtype_name, device, seed, fill, given, name)
    arguments = list(schema.arguments)
    maker.strided = any(a.name == "size" for a in arguments)
    positional = [a for a in arguments if not a.kwarg_only]
    # positional arguments up to the last one without a default; defaults before it are given
    last = max(
        (
            i
            for i, a in enumerate(positional)
            if not a.has_default_value() or (fill and _fillable(a)) or a.name in given
        ),
        default=-1,
    )
    sample = Sample(
        args=[],
        kwargs={},
        plan=f"{dtype_name}{list(shape)}"
        + (" filled" if fill else "")
        + (f" {family.name}" if family is not None else ""),
    )
    outs = []
    for i, a in enumerate(arguments):
        written = _written(a)
        if written:
            sample.written.append(a.name if a.kwarg_only else f"arg{i}")
        is_device = a.type.kind() == "DeviceObjType" or (
            a.type.kind() == "OptionalType" and a.type.getElementType().kind() == "DeviceObjType"
        )
        if a.kwarg_only:
            if (
                a.has_default_value()
                and not is_device
                and not (fill and _fillable(a))
                and a.name not in given
            ):
                continue
            sample.kwargs[a.name] = maker.value(a.name, a.type, a.N, written=written, kw=True)
            if written and a.type.kind() == "TensorType":
                outs.append(a.name)
        elif i <= last:  # (a default's value is never read: reading some crashes torch)
            sample.args.append(maker.value(a.name, a.type, a.N, written=written, kw=False))
    if outs:  # out= tensors of the dtypes the functional returns (isin.out: bool)
        dtypes = _out_dtypes(schema, sample, outs)
        for out_name, dtype in zip(outs, dtypes or [], strict=False):
            sample.kwargs[out_name] = maker.torch.empty(0, dtype=dtype, device=device)
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
