"""simdev: the reference device, a PrivateUse1 backend written in Python.

It behaves like a young native backend, so every placement detector can be proven on a laptop:
own kernels for a set of aten ops, and a CPU fallback for every other op that warns once per op
type and is counted (the TorchNeuron pattern); ``TORCHPORT_SIMDEV_STRICT=1`` turns the fallback
into ``NotImplementedError`` (the MPS pattern without its fallback switch).

How it holds data: a simdev tensor is a real PrivateUse1 ``TensorImpl`` whose storage has the
right byte size but no data pointer. The bytes live in a side table, keyed by the device storage
(``untyped_storage()._cdata``), as a CPU ``UntypedStorage``. Views share the device storage and so
the host bytes; a kernel sees a simdev tensor as a CPU tensor *aliasing* those bytes, which makes
in-place ops, ``out=`` and views correct with no copying back. An entry dies with its storage.

"Own kernels" compute with CPU torch on the side-table bytes, like the fallback; what makes them
native is that they are registered for the simdev dispatch key and are not counted as fallbacks.

Native-set override: ``install(native_ops=[...])`` or ``TORCHPORT_SIMDEV_NATIVE_OPS`` (comma list;
``none`` for an empty set; entries all prefixed ``+``/``-`` edit the default set instead). Names
are ``aten::add``, ``add`` or ``add.Tensor``; a bare name covers every overload and ``add_``.
Transfers (``_copy_from``) are always native. ``DELIBERATELY_MISSING`` says what the default set
leaves to the fallback and which smoke models that shows up in.

Public API: ``install``, ``get_executed_ops``, ``get_fallback_ops``, ``clear_op_tracking``,
``native_ops``, ``resolve_native_ops``, ``memory_allocated``; the device module ``torch.simdev``
(``synchronize``, ``is_available``, ``device_count``, ``memory_allocated``, and the CPU's
no-op ``Stream`` / ``Event`` / ``current_stream`` / ``stream``: one implicit stream); and
``torch.compile(backend="simdev")``: AOT autograd with the graphs run as-is, like ``aot_eager``.
Strict mode is read at each fallback, so it can be switched within a process.

Donation (``TORCHPORT_SIMDEV_DONATE=1``, read at each compiled call): the compiled graph donates
the device buffers of the inputs it mutates, as torch_xla's openxla does: the tensor gets new
memory holding the new values and the old memory is deleted, so any other tensor still sharing
it raises "called on deleted or donated buffer" when read.

Device compute is invisible to observers, as on real hardware: own kernels and transfers run
their host arithmetic with RecordFunction off, so torch.profiler sees the device op and nothing
inside it. The CPU fallback stays visible (a host op nested in a device op), which is how a
real backend's ``cpu_fallback`` looks to the profiler.

The same machinery makes other test backends (``install(name=..., fallback_message=...,
silent_fallback=...)``): a backend under another PrivateUse1 name, one that words its fallback
warning its own way, or one that falls back without any word (see ``devices/quirkdev.py``).

No float64 (``TORCHPORT_SIMDEV_FLOAT64``, read at each op): ``refuse`` makes every kernel that
computes raise on a float64 device tensor, as OpenReg's float32-only kernels do ("... only
supports float type"; tensors are still made, viewed and copied); ``float32`` computes float64
silently at float32 precision (values rounded on the way in and out, the dtype still says
float64), as a backend that downcasts without a word.

Planted device bugs of the kinds a conformance suite must find (in-place with a scalar, out=
aliasing, mixed devices, error inputs, NaN, a fallback inside a kernel): opt-in with
``TORCHPORT_SIMDEV_BUGS`` (devices/simdev_bugs.py).

Planted wrong kernels (for proving parity checks): ``TORCHPORT_SIMDEV_WRONG_OPS`` (comma list,
names as for the native set, read at install) makes those native kernels return wrong values:
floating and integer outputs + 1, bool outputs negated. Only native ops can be planted.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Iterable

import torch
from torch.utils._pytree import tree_map

from torchport import settings

DEVICE_NAME = "simdev"
NATIVE_OPS_ENV = "TORCHPORT_SIMDEV_NATIVE_OPS"
STRICT_ENV = "TORCHPORT_SIMDEV_STRICT"
WRONG_OPS_ENV = "TORCHPORT_SIMDEV_WRONG_OPS"
DONATE_ENV = "TORCHPORT_SIMDEV_DONATE"
FLOAT64_ENV = "TORCHPORT_SIMDEV_FLOAT64"
# Ops that only make, view or move memory: a device without float64 arithmetic still holds
# float64 tensors (OpenReg's model: its float32-only kernels refuse, its copies do not).
_FLOAT64_MEMORY_OPS = frozenset(
    {
        "empty",
        "empty_strided",
        "as_strided",
        "view",
        "_reshape_alias",
        "_unsafe_view",
        "alias",
        "resize_",
        "set_",
        "fill_",
        "zero_",
        "copy_",
        "_to_copy",
        "clone",
        "_local_scalar_dense",
        "detach",
        "lift_fresh",
        "expand",
        "slice",
        "select",
        "unfold",
    }
)

# Ops that reach the backend key (composites decompose before it) in forward + backward of the
# smoke models (MLP, conv net, HF llama / gpt2 / qwen3_moe, eager and torch.compile), found by
# tracing with an empty native set, plus common elementwise, reduction and random ops a young
# backend ships first. A bare name covers every overload and the in-place variant (add, add_).
DEFAULT_NATIVE_OPS: tuple[str, ...] = tuple(
    f"aten::{n}"
    for n in (
        # memory, views, transfers
        "empty",
        "empty_strided",
        "as_strided",
        "view",
        "_reshape_alias",
        "unfold",
        "resize_",
        "set_",
        "fill_",
        "zero_",
        "_local_scalar_dense",
        "cat",
        "index",
        "index_select",
        "gather",
        "scatter",
        "scatter_add",
        "masked_fill",
        "masked_select",
        "nonzero",
        "where",
        "arange",
        # elementwise
        "add",
        "sub",
        "mul",
        "div",
        "neg",
        "pow",
        "rsqrt",
        "sqrt",
        "exp",
        "log",
        "log1p",
        "abs",
        "sign",
        "reciprocal",
        "remainder",
        "floor_divide",
        "addcmul",
        "addcdiv",
        "lerp",
        "clamp",
        "clamp_min",
        "maximum",
        "minimum",
        "sin",
        "cos",
        "erf",
        "tanh",
        "sigmoid",
        "eq",
        "ne",
        "gt",
        "ge",
        "lt",
        "le",
        "logical_not",
        "bitwise_and",
        "bitwise_or",
        "ceil",
        "floor",
        "round",
        # activations and their backward
        "relu",
        "threshold_backward",
        "gelu",
        "gelu_backward",
        "silu",
        "tanh_backward",
        "hardtanh",
        "leaky_relu",
        # matmul, convolution, pooling, normalisation
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "convolution_overrideable",
        "convolution_backward_overrideable",
        "max_pool2d_with_indices",
        "max_pool2d_with_indices_backward",
        "native_batch_norm",
        "native_batch_norm_backward",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "native_layer_norm_backward",
        "native_group_norm_backward",
        "var_mean",
        # reductions, softmax, loss
        "sum",
        "mean",
        "amax",
        "max",
        "min",
        "argmax",
        "prod",
        "linalg_vector_norm",
        "sort",
        "topk",
        "histc",
        "_softmax",
        "_softmax_backward_data",
        "_log_softmax",
        "_log_softmax_backward_data",
        "nll_loss_forward",
        "nll_loss_backward",
        "mse_loss",
        "mse_loss_backward",
        "flip",
        # random (computed with the CPU generator, so seeded runs match the CPU)
        "normal_",
        "uniform_",
        "bernoulli_",
        "random_",
        "native_dropout",
        "native_dropout_backward",
    )
)

# Left out on purpose, so that the smoke suite shows realistic fallback (op -> who falls back).
# The MLP and the conv net stay clean in eager and compile: the on-device baseline.
DELIBERATELY_MISSING: dict[str, str] = {
    "aten::cumsum": "qwen3_moe forward (MoE expert offsets)",
    "aten::embedding_dense_backward": "llama, gpt2, qwen3_moe backward (token embedding grad)",
    "aten::_index_put_impl_": "qwen3_moe forward and backward (index_put in the MoE experts)",
}


class SimdevFallbackWarning(UserWarning):
    """Warned once per op type that runs through the CPU fallback."""


# ---------------------------------------------------------------------------------------------
# Tracking (the Neuron API)

_lock = threading.Lock()  # backward runs on the autograd device thread
_executed_counts: collections.Counter[str] = collections.Counter()
_fallback_counts: collections.Counter[str] = collections.Counter()
_warned: set[str] = set()  # once per op type per process, as Neuron logs


def get_executed_ops() -> dict[str, int]:
    """Every op executed on simdev (native and fallback): ``{"aten::mm": 12, ...}``."""
    with _lock:
        return dict(_executed_counts)


def get_fallback_ops() -> dict[str, int]:
    """Ops that ran through the CPU fallback, with their counts."""
    with _lock:
        return dict(_fallback_counts)


def clear_op_tracking() -> None:
    """Reset both counters (the once-per-op warning stays once per process)."""
    with _lock:
        _executed_counts.clear()
        _fallback_counts.clear()


def _record(name: str, fallback: bool) -> None:
    with _lock:
        _executed_counts[name] += 1
        if fallback:
            _fallback_counts[name] += 1
    launched = _state.get("on_launch")
    if launched is not None:  # a test backend that queues work (devices/accdev.py)
        launched(name)


# ---------------------------------------------------------------------------------------------
# Device memory: the side table

_META = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset
_as_strided_ = torch.ops.aten.as_strided_.default


class _Entry:
    __slots__ = ("host", "device_ref")

    def __init__(self, host: torch.UntypedStorage, device: torch.UntypedStorage):
        self.host = host  # CPU bytes
        self.device_ref = weakref.ref(device)  # the simdev storage they belong to


_table: dict[int, _Entry] = {}  # device storage _cdata -> entry
_by_host: dict[int, int] = {}  # host storage _cdata -> device storage _cdata

# Device addresses. A real backend's allocator gives every storage a data pointer (device
# memory the host cannot read), and torch code compares storages by it: FSDP2's
# ``reset_sharded_param`` reads ``untyped_storage().data_ptr()``. torch's Python PrivateUse1
# API allocates nothing (``create_empty_tensor`` leaves the pointer null, and ``data_ptr()``
# then raises "invalid python storage"), so simdev gives each device storage an address of its
# own in a virtual device address space: one slot of ``_SLOT_BYTES`` per live storage, reused
# after it dies; never dereferenced (the bytes stay in the side table). A storage's size is
# then set by swapping in a fresh storage with the same address and the new size (``_resize``)
# instead of growing through the Meta ``set_`` kernel, which refuses a storage made from a
# pointer. Both are private torch APIs: without them storages keep no address, as before.
_SLOT_BYTES = 1 << 36  # 64 GiB of addresses per storage: far more than a CPU-backed device holds
_ADDRESSES = hasattr(torch._C, "_construct_storage_from_data_pointer") and hasattr(
    torch.UntypedStorage, "_swap_data_ptr_"
)
_free_slots: list[int] = []
_slot_count = [0]


def device_addresses() -> bool:
    """Whether simdev storages have device addresses (``data_ptr()``) in this torch."""
    return _ADDRESSES


def _new_slot() -> int:
    if _free_slots:
        return _free_slots.pop()
    _slot_count[0] += 1
    return _slot_count[0]


def _is_addressed(device: torch.UntypedStorage) -> bool:
    try:
        return device.data_ptr() != 0
    except RuntimeError:  # a null pointer with bytes: "invalid python storage"
        return False


def _resize(device: torch.UntypedStorage, nbytes: int, address: int | None = None) -> None:
    """``device`` holds ``nbytes`` from now on (grown or shrunk), at ``address`` (default: the
    one it has). The storage object and every tensor on it stay the same."""
    if address is None:
        address = device.data_ptr()
    make = torch._C._construct_storage_from_data_pointer
    if device.nbytes() not in (0, nbytes):  # a swap needs equal sizes or one empty side
        device._swap_data_ptr_(make(address, device.device, 0))  # type: ignore[attr-defined]
    device._swap_data_ptr_(make(address, device.device, nbytes))  # type: ignore[attr-defined]


def _forget(device_key: int, host_key: int, slot: int | None = None) -> None:
    _table.pop(device_key, None)
    _by_host.pop(host_key, None)
    if slot is not None:
        _free_slots.append(slot)


def _set_metadata(t: torch.Tensor, storage, offset: int | torch.SymInt, size, stride) -> None:
    # The Meta kernels of set_ and as_strided_ only swap storage and metadata; they never
    # touch the data pointer, so they work on a simdev tensor. set_ with no elements first:
    # with elements it would grow the storage, and refuses one made from a pointer.
    _set_storage.redispatch(_META, t, storage, offset, [0], [1])
    _as_strided_.redispatch(_META, t, list(size), list(stride), offset)


def _grow(device: torch.UntypedStorage, nbytes: int) -> None:
    if device.nbytes() >= nbytes:
        return
    if _ADDRESSES and _is_addressed(device):
        _resize(device, nbytes)
        return
    empty = torch._C._acc.create_empty_tensor([0], torch.uint8)  # type: ignore[arg-type]
    _set_storage.redispatch(_META, empty, device, 0, [nbytes], [1])  # grows the storage


def _register(host: torch.UntypedStorage, device: torch.UntypedStorage) -> _Entry:
    slot = None
    if _ADDRESSES and not _is_addressed(device):
        slot = _new_slot()
        _resize(device, device.nbytes(), slot * _SLOT_BYTES)
    entry = _table[device._cdata] = _Entry(host, device)
    _by_host[host._cdata] = device._cdata
    # Storage Python objects are preserved while the StorageImpl lives (views, autograd graph),
    # so this runs when the last user of the device memory is gone.
    weakref.finalize(device, _forget, device._cdata, host._cdata, slot)
    return entry


def _new_device_storage(host: torch.UntypedStorage) -> torch.UntypedStorage:
    """A simdev storage whose bytes are ``host`` (adopted, not copied)."""
    device = torch._C._acc.create_empty_tensor([0], torch.uint8).untyped_storage()  # type: ignore[arg-type]
    _grow(device, host.nbytes())
    _register(host, device)
    return device


_donated: set[int] = set()  # device storage _cdata whose memory a compiled graph donated
_donations: collections.Counter[str] = (
    collections.Counter()
)  # "buffers": how many a compiled graph has donated


def donations() -> int:
    """Device buffers compiled graphs have donated in this process (TORCHPORT_SIMDEV_DONATE)."""
    return _donations["buffers"]


def _host_storage(device: torch.UntypedStorage) -> torch.UntypedStorage:
    if device._cdata in _donated:
        raise RuntimeError(
            "simdev: read of a device buffer a compiled graph donated (called on deleted or "
            "donated buffer)"
        )
    entry = _table.get(device._cdata)
    if entry is None:  # made outside simdev's kernels (create_empty_tensor): zeroed bytes
        entry = _register(torch.UntypedStorage(device.nbytes()).fill_(0), device)  # type: ignore[attr-defined]
    if entry.host.nbytes() < device.nbytes():
        entry.host.resize_(device.nbytes())
    return entry.host


def _resize_storage(device: torch.UntypedStorage, nbytes: int) -> torch.UntypedStorage:
    """``storage.resize_(nbytes)`` on a simdev storage (FSDP2 frees and re-allocates each
    unsharded parameter this way): the host bytes keep their first ``min(old, new)`` bytes and
    the device storage its address. A C++ backend answers this in its PrivateUse1 hooks
    (``resizePrivateUse1Bytes``), which torch's Python backend hooks cannot define."""
    host = _host_storage(device)
    host.resize_(nbytes)
    _resize(device, nbytes)
    return device


def _patch_storage_resize() -> None:
    original = torch.UntypedStorage.resize_

    @functools.wraps(original)
    def resize_(self, size):
        if self.device.type == _state["name"]:
            return _resize_storage(self, int(size))
        return original(self, size)

    torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign]


def _host_view(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor aliasing the bytes of simdev tensor ``t`` (same size, stride, offset)."""
    host = _host_storage(t.untyped_storage())
    h = torch.empty(0, dtype=t.dtype).set_(host, t.storage_offset(), t.size(), t.stride())
    # A lazy conjugate or negative view reads its bytes through the bit: keep it, or kernels
    # compute on the unconjugated values.
    torch._C._set_conj(h, t.is_conj())
    torch._C._set_neg(h, t.is_neg())
    return h


def _to_device(h: torch.Tensor) -> torch.Tensor:
    """The simdev tensor for CPU result ``h``: a view if ``h`` aliases device bytes, else new."""
    host = h.untyped_storage()
    device_key = _by_host.get(host._cdata)
    device = _table[device_key].device_ref() if device_key is not None else None
    if device is None:
        device = _new_device_storage(host)
    _grow(device, host.nbytes())
    out = torch._C._acc.create_empty_tensor([0], h.dtype)  # type: ignore[arg-type]
    _set_metadata(out, device, h.storage_offset(), h.size(), h.stride())
    torch._C._set_conj(out, h.is_conj())
    torch._C._set_neg(out, h.is_neg())
    return out


def _same_layout(d: torch.Tensor, h: torch.Tensor) -> bool:
    return (
        d.size() == h.size()
        and d.stride() == h.stride()
        and d.storage_offset() == h.storage_offset()
    )


# ---------------------------------------------------------------------------------------------
# Running an op on the side-table bytes (shared by own kernels and the fallback)


def _name() -> str:
    return _state["name"]


def _is_simdev(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == _state["name"]


_hidden_depth = threading.local()


@contextlib.contextmanager
def _device_compute():
    """Host arithmetic that stands for device compute: hidden from RecordFunction (profilers),
    as a real device kernel's work is. Nested kernels keep it hidden until the outermost ends."""
    depth = getattr(_hidden_depth, "n", 0)
    _hidden_depth.n = depth + 1
    if depth == 0:
        torch._C._autograd._enable_record_function(False)
    try:
        yield
    finally:
        _hidden_depth.n = depth
        if depth == 0:
            torch._C._autograd._enable_record_function(True)


def _float64_mode() -> str:
    return settings.value(FLOAT64_ENV)


def _float64_args(args, kwargs) -> bool:
    found = []

    def look(x):
        if _is_simdev(x) and x.dtype == torch.float64:
            found.append(x)
        return x

    tree_map(look, (args, kwargs))
    return bool(found)


def _round_float64(value):
    """Every float64 simdev tensor in ``value`` rounded to float32 precision, in place."""

    def spoil(x):
        if _is_simdev(x) and x.dtype == torch.float64:
            host = _host_view(x)
            host.copy_(host.float())
        return x

    tree_map(spoil, value)
    return value


def _execute(op, args, kwargs):
    mode = _float64_mode()
    if mode in ("refuse", "float32"):
        schema = getattr(op, "_schema", None)
        name = _normalize(schema.name) if schema is not None else getattr(op, "__name__", "")
        computes = name.removesuffix("_") not in _FLOAT64_MEMORY_OPS and (
            name not in _FLOAT64_MEMORY_OPS
        )
        if computes and _float64_args(args, kwargs):
            if mode == "refuse":
                raise RuntimeError(
                    f"{name} kernel only supports float32 on {_name()}: got a float64 tensor "
                    f"({FLOAT64_ENV}=refuse)"
                )
            return _round_float64(_compute(op, args, kwargs))
    return _compute(op, args, kwargs)


def _compute(op, args, kwargs):
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []  # (simdev arg, its CPU alias)
    cpu_args: set[int] = set()  # storages of genuine CPU args

    def to_host(x):
        if _is_simdev(x):
            h = _host_view(x)
            pairs.append((x, h))
            return h
        if isinstance(x, torch.Tensor) and x.device.type == "cpu":
            cpu_args.add(x.untyped_storage()._cdata)
        if isinstance(x, torch.UntypedStorage) and x.device.type == _state["name"]:
            return _host_storage(x)
        if isinstance(x, torch.device) and x.type == _state["name"]:
            return torch.device("cpu")  # factories: empty, empty_strided, ...
        return x

    out = op(*tree_map(to_host, args), **tree_map(to_host, kwargs))

    # In-place metadata changes (resize_, set_, transpose_, out= resized) reach the simdev arg.
    for d, h in pairs:
        host = h.untyped_storage()
        same_storage = host._cdata == _host_storage(d.untyped_storage())._cdata
        if same_storage and _same_layout(d, h) and host.nbytes() <= d.untyped_storage().nbytes():
            continue
        device = d.untyped_storage() if same_storage else _to_device(h).untyped_storage()
        _grow(device, host.nbytes())
        _set_metadata(d, device, h.storage_offset(), h.size(), h.stride())

    # Results: an arg returned as-is (in-place, out=) is that simdev arg; the rest map by bytes.
    returned = {id(h): d for d, h in pairs}

    def to_device(x):
        if not (isinstance(x, torch.Tensor) and x.device.type == "cpu"):
            return x
        d = returned.get(id(x))
        if d is not None:
            return d
        if x._is_zerotensor():
            # an efficient zero tensor (e.g. the gradient of sgn) has no bytes: adopting its
            # storage as device memory made every later read of it a segfault
            return _to_device(torch.zeros(x.shape, dtype=x.dtype))
        if x.untyped_storage()._cdata in cpu_args:
            x = x.clone()  # never adopt the bytes of a caller's CPU tensor as device memory
        return _to_device(x)

    return tree_map(to_device, out)


def _native_kernel(op, *args, **kwargs):
    _record(op._schema.name, fallback=False)
    if _state["host_compute"]:  # a backend whose kernels call CPU aten ops, seen by profilers
        return _execute(op, args, kwargs)
    with _device_compute():
        return _execute(op, args, kwargs)


def _wrong_kernel(op, *args, **kwargs):
    """A planted faulty kernel: the native result, then every tensor it returns made wrong."""
    value = _native_kernel(op, *args, **kwargs)

    def spoil(x):
        if _is_simdev(x) and x.dtype == torch.bool:
            _host_view(x).logical_not_()
        elif _is_simdev(x):
            _host_view(x).add_(1)
        return x

    tree_map(spoil, value)
    return value


def _planted_wrong(overload) -> bool:
    names = {_normalize(n) for n in settings.value(WRONG_OPS_ENV).split(",") if n.strip()}
    base = overload._schema.name.removeprefix("aten::")
    return bool(names & {base, base.removesuffix("_"), f"{base}.{overload._overloadname}"})


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False):
    """Host <-> device copies (``.to``, ``.cpu()``, ``copy_``); always synchronous."""
    _record("aten::_copy_from", fallback=False)
    with _device_compute():
        src_h = _host_view(src) if _is_simdev(src) else src
        dst_h = _host_view(dst) if _is_simdev(dst) else dst
        dst_h.copy_(src_h)
    if _float64_mode() == "float32" and _is_simdev(dst) and dst.dtype == torch.float64:
        _round_float64(dst)  # the device keeps float32 precision whatever the dtype says
    return dst


def _copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor):
    _record("aten::_copy_from_and_resize", fallback=False)
    if dst.size() != src.size():
        with _device_compute():
            dst.resize_(src.size())
    return _copy_from(src, dst)


def _enter_fallback(name: str) -> None:
    """Strict mode raises; otherwise count the op and warn once per op type (an op in the
    silent set does neither: the backend keeps no word of it)."""
    if settings.value(STRICT_ENV):
        raise NotImplementedError(
            f"Operator '{name}' is not implemented on {_name()} and the CPU fallback is off "
            f"({STRICT_ENV}=1)"
        )
    if _normalize(name) in _state["silent"]:
        return
    _record(name, fallback=True)
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            _state["message"].format(op=name, device=_name()), SimdevFallbackWarning, stacklevel=3
        )


def _fallback(op, *args, **kwargs):
    _enter_fallback(op._schema.name)
    return _execute(op, args, kwargs)


# Ops that torch routes to a backend under another name: the CPU has no kernel for the name the
# backend sees, so they are run through their CPU equivalent. ``*_overrideable`` ops even have a
# composite kernel that raises, so without an entry here the fallback would never see them.
def _conv_backward_on_host(
    grad_out,
    inp,
    weight,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    # weight: (out, in/groups, kh, kw), or (in, out/groups, kh, kw) when transposed
    bias_sizes = [weight.size(1) * groups if transposed else weight.size(0)]
    return torch.ops.aten.convolution_backward.default(
        grad_out,
        inp,
        weight,
        bias_sizes,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        output_mask,
    )


def _histc_on_host(x, bins=100, min=0, max=0):
    # Accelerators count integer input (transformers' MoE routing relies on it off the CPU);
    # the CPU kernel takes floating point only.
    if x.is_floating_point():
        return torch.ops.aten.histc.default(x, bins, min, max)
    return torch.ops.aten.histc.default(x.double(), bins, min, max).to(x.dtype)


_HOST_EQUIVALENTS = {
    "convolution_overrideable": torch.ops.aten.convolution.default,
    "convolution_backward_overrideable": _conv_backward_on_host,
    "histc": _histc_on_host,
}


def _translated_kernel(name: str, host_fn, native: bool, *args, **kwargs):
    if not native:
        _enter_fallback(name)
        return _execute(host_fn, args, kwargs)
    _record(name, fallback=False)
    with _device_compute():
        return _execute(host_fn, args, kwargs)


# ---------------------------------------------------------------------------------------------
# Choosing and registering the native set


def _normalize(name: str) -> str:
    name = name.strip()
    for prefix in ("aten::", "aten.", "torch.ops.aten."):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


_DEFAULT_NAMES = frozenset(_normalize(n) for n in DEFAULT_NATIVE_OPS)


def resolve_native_ops(native_ops: Iterable[str] | None = None) -> frozenset[str]:
    """The native set as bare names (``add``, ``add.Tensor``): argument > env var > default."""
    if isinstance(native_ops, str):
        native_ops = native_ops.split(",")
    if native_ops is not None:
        return frozenset(_normalize(n) for n in native_ops if n.strip())
    raw = settings.value(NATIVE_OPS_ENV).strip()
    if not raw:
        return _DEFAULT_NAMES
    if raw.lower() == "none":
        return frozenset()
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    edits = all(e[0] in "+-" for e in entries)
    names = set(_DEFAULT_NAMES) if edits else set()
    for e in entries:
        if e[0] == "-":
            names.discard(_normalize(e[1:]))
        else:
            names.add(_normalize(e.lstrip("+")))
    return frozenset(names)


def _overloads(name: str, *, strict: bool) -> list:
    """Dispatcher OpOverloads for ``add`` (all of add and add_) or ``add.Tensor`` (that one).
    Unknown names raise when ``strict`` (a user's list) and are skipped otherwise (the default
    set, should a torch release drop an op)."""
    packet_name, _, overload = name.partition(".")
    packets = (
        [packet_name] if overload or packet_name.endswith("_") else [packet_name, packet_name + "_"]
    )
    found = []
    for p in packets:
        packet = getattr(torch.ops.aten, p, None)
        if packet is None:
            continue
        for o in [overload] if overload else packet.overloads():
            op = getattr(packet, o, None)
            if op is not None and _is_dispatcher_op(op):
                found.append(op)
    if not found and strict:
        raise ValueError(f"simdev: unknown aten op {name!r} in the native op set")
    return found


def _is_dispatcher_op(op) -> bool:
    # TorchScript-only overloads (exp.int, eq.str, ...) have no dispatcher entry to register on.
    try:
        torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CPU")
        return True
    except RuntimeError:
        return False


def _native_kernels(names: frozenset[str]) -> list[tuple]:
    """(OpOverload, kernel) pairs to register for the native set; raises on unknown names."""
    # Transfers are always native: a device without them is no device.
    kernels = [
        (torch.ops.aten._copy_from.default, _copy_from),
        (torch.ops.aten._copy_from_and_resize.default, _copy_from_and_resize),
    ]
    # Translated ops are always registered; the native set decides how they are counted.
    for op_name, host_fn in _HOST_EQUIVALENTS.items():
        kernels.append(
            (
                getattr(torch.ops.aten, op_name).default,
                functools.partial(
                    _translated_kernel, f"aten::{op_name}", host_fn, op_name in names
                ),
            )
        )
    # _to_copy changes device: it must stay the composite that ends in _copy_from.
    skip = {"_copy_from", "_copy_from_and_resize", "_to_copy", *_HOST_EQUIVALENTS}
    for name in sorted(names):
        for overload in _overloads(name, strict=name not in _DEFAULT_NAMES):
            if overload._schema.name.removeprefix("aten::") in skip:
                continue
            # A backend kernel for a CompositeImplicitAutograd op would hide its autograd
            # formula (the op has none of its own): those must decompose, never be native.
            if torch._C._dispatch_has_kernel_for_dispatch_key(
                overload.name(), "CompositeImplicitAutograd"
            ):
                continue
            kernel = _wrong_kernel if _planted_wrong(overload) else _native_kernel
            kernels.append((overload, functools.partial(kernel, overload)))
    return kernels


# ---------------------------------------------------------------------------------------------
# Device module (torch.simdev), compile backend, install


def memory_allocated(device=None) -> int:
    """Bytes of device memory held now (all live device storages)."""
    return sum(e.host.nbytes() for e in list(_table.values()))


def _device_module() -> types.SimpleNamespace:
    """``torch.simdev``: what torch and the runner's adapter call on a device module."""
    return types.SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: True,
        _is_in_bad_fork=lambda: False,
        device_count=lambda: 1,
        current_device=lambda: 0,
        synchronize=lambda device=None: None,  # kernels finish before they return
        manual_seed_all=lambda seed: None,  # random ops use the CPU generator, seeded already
        # ... so the device's generator state is the CPU's (torch.testing's freeze_rng_state
        # saves and restores the current accelerator's state around seeded ops)
        get_rng_state=lambda device="simdev": torch.get_rng_state(),
        set_rng_state=lambda state, device="simdev": torch.set_rng_state(state),
        memory_allocated=memory_allocated,
        # One implicit stream, as on the CPU: kernels finish before they return, so streams
        # and events order nothing that is not ordered already. torch.cpu's stand-ins for
        # device-agnostic code say exactly that; FSDP2 asks every device module for them.
        Stream=torch.cpu.Stream,
        Event=torch.cpu.Event,
        current_stream=torch.cpu.current_stream,
        stream=torch.cpu.stream,
    )


def _shallow_copy_compatible(self: torch.Tensor, other: torch.Tensor) -> bool:
    # torch counts only in-tree dense backends (CPU, CUDA, MPS, XPU...) as compatible, so on a
    # PrivateUse1 device Module.to() makes new Parameters instead of swapping data in place,
    # which unties tied weights (gpt2's wte / lm_head) and orphans optimizer state. simdev
    # answers as CUDA does; a real PrivateUse1 backend without this shows that failure.
    return (
        self.layout == torch.strided
        and other.layout == torch.strided
        and not (self.is_meta or other.is_meta)
    )


def _simdev_compile(gm, example_inputs, **kwargs):
    """``torch.compile(backend="simdev")``: AOT autograd, graphs run as-is (like aot_eager);
    with ``TORCHPORT_SIMDEV_DONATE=1``, mutated inputs' buffers are donated (``_donating``)."""
    from torch._dynamo.backends.debugging import aot_eager

    return _donating(aot_eager(gm, example_inputs, **kwargs))


def _donating(compiled):
    def run(*args):
        if not settings.value(DONATE_ENV):
            return compiled(*args)
        inputs = [a for a in args if isinstance(a, torch.Tensor) and _is_simdev(a)]
        versions = [a._version for a in inputs]
        out = compiled(*args)
        for a, version in zip(inputs, versions, strict=True):
            if a._version != version:  # mutated by the graph: its old memory is donated
                _donate(a)
        return out

    return run


def _donate(t: torch.Tensor) -> None:
    """New memory for ``t`` holding its values; the old memory is deleted."""
    old = t.untyped_storage()
    host = torch.UntypedStorage(old.nbytes())
    host.copy_(_host_storage(old))
    device = _new_device_storage(host)
    _set_metadata(t, device, t.storage_offset(), t.size(), t.stride())
    _donated.add(old._cdata)
    _donations["buffers"] += 1
    weakref.finalize(old, _donated.discard, old._cdata)


def _opaque(kernel):
    """``kernel`` as torch.compile sees a C++ backend's kernel: never traced.

    The dispatcher calls simdev's kernels as Python functions. While a compiled function runs
    (its eager stretches between graphs included), dynamo sees every Python frame that starts
    and compiles it, so without this it compiled simdev's own kernels, frame by frame and shape
    by shape, handing their graphs to the compile backend under test: work a real backend's
    compiled model never does (for compiled tensor parallel qwen3_moe it ended in a
    RecursionError in AOT autograd's tracing of symbolic sizes)."""
    return torch.compiler.disable(kernel, recursive=True)


def _register_compile_backend(name: str) -> None:
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if name not in _COMPILER_FNS:
        register_backend(compiler_fn=_simdev_compile, name=name)


DEFAULT_MESSAGE = "Operator '{op}' executed via CPU fallback on {device}"
_state: dict = {
    "fallback_lib": None,
    "device_lib": None,
    "native_lib": None,
    "native": None,
    "name": DEVICE_NAME,
    "message": DEFAULT_MESSAGE,
    "silent": frozenset(),
    "host_compute": False,
}
_install_lock = threading.Lock()


def install(
    native_ops: Iterable[str] | None = None,
    *,
    name: str = DEVICE_NAME,
    fallback_message: str = DEFAULT_MESSAGE,
    silent_fallback: Iterable[str] = (),
    host_compute: bool = False,
) -> None:
    """Make ``name`` (default ``simdev``) a torch device in this process. Idempotent; a repeat
    call with another native set re-registers the kernels (the PrivateUse1 name itself can be
    set only once per process).

    fallback_message: the once-per-op warning, formatted with ``op`` and ``device``.
    silent_fallback:  ops (``aten::cumsum`` or ``cumsum``) the fallback serves without warning
                      and without counting them: a backend that says nothing.
    host_compute:     native kernels run their CPU aten ops visibly (a profiler sees host work
                      nested inside every device kernel), as a backend computing on host bytes.
    """
    names = resolve_native_ops(native_ops)
    with _install_lock:
        if _state["fallback_lib"] is None:
            _state.update(
                name=name,
                message=fallback_message,
                silent=frozenset(_normalize(n) for n in silent_fallback),
                host_compute=host_compute,
            )
            _setup_device()
        elif name != _state["name"]:
            raise RuntimeError(
                f"PrivateUse1 is already named {_state['name']!r} in this "
                f"process; cannot install {name!r} too"
            )
        if _state["native"] != names:
            kernels = _native_kernels(names)  # validate before dropping the kernels in place
            if _state["native_lib"] is not None:
                _state["native_lib"]._destroy()
            lib = torch.library.Library("aten", "IMPL")
            for overload, kernel in kernels:
                lib.impl(overload, _opaque(kernel), "PrivateUse1")
            _state["native_lib"], _state["native"] = lib, names
        if _state.get("bugs_lib") is None:  # planted bugs, opt-in (devices/simdev_bugs.py)
            from torchport.devices import simdev_bugs

            kinds = simdev_bugs.wanted()
            if kinds:
                _state["bugs_lib"] = simdev_bugs.register(sys.modules[__name__], kinds)


def native_ops() -> frozenset[str]:
    """The native set now registered (``aten::add``, ...), empty before ``install``."""
    return frozenset(f"aten::{n}" for n in _state["native"] or ())


def _setup_device() -> None:
    from torch.utils import backend_registration

    setup = getattr(backend_registration, "_setup_privateuseone_for_python_backend", None)
    if setup is None or not hasattr(torch._C, "_acc"):
        raise RuntimeError(
            f"simdev needs torch's PrivateUse1 Python-backend hooks (torch 2.10+); torch "
            f"{torch.__version__} lacks _setup_privateuseone_for_python_backend"
        )
    current = torch._C._get_privateuse1_backend_name()
    if current != "privateuseone":
        raise RuntimeError(
            f"PrivateUse1 is already named {current!r} in this process; simdev can only be "
            f"installed in a process whose PrivateUse1 backend is still unclaimed"
        )
    setup(_state["name"], backend_module=_device_module())
    fallback_lib = torch.library.Library("_", "IMPL")
    fallback_lib.fallback(_opaque(_fallback), "PrivateUse1")
    device_lib = torch.library.Library("aten", "IMPL")
    device_lib.impl(
        "_has_compatible_shallow_copy_type", _opaque(_shallow_copy_compatible), "PrivateUse1"
    )
    _state["fallback_lib"], _state["device_lib"] = fallback_lib, device_lib
    if _ADDRESSES:
        _patch_storage_resize()
    _register_compile_backend(_state["name"])


def keep_non_persistent_buffers_on_host(device_name: str) -> None:
    """A planted fault of the quirkdev and hostdev test backends: ``Module.to(device_name)``
    leaves non-persistent buffers where they were (on the host)."""
    import functools

    import torch

    original = torch.nn.Module.to

    @functools.wraps(original)
    def to(self, *args, **kwargs):
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is None or device.type != device_name:
            return original(self, *args, **kwargs)
        kept = [
            (m, n, m._buffers[n])
            for m in self.modules()
            for n in m._non_persistent_buffers_set
            if m._buffers.get(n) is not None
        ]
        moved = original(self, *args, **kwargs)
        for module, name, buffer in kept:
            module._buffers[name] = buffer
        return moved

    setattr(torch.nn.Module, "to", to)  # noqa: B010 - patching is this fault's point
