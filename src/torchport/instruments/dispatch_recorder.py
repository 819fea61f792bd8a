"""The generic recorder: every op that reaches the dispatcher, with the devices of its tensors.

A ``TorchDispatchMode`` sees each aten op below autograd (composites already decomposed), so
it works for any backend, PrivateUse1 ones included, with no help from the backend. It declares
``ignore_compile_internals()``: torch.compile then switches the mode off while it compiles and
back on while the compiled code runs, so the ops a compiled artifact calls are seen too (a mode
without it makes Dynamo skip the frame, and the code runs eagerly instead).

What it cannot see: what a backend does *inside* one op (a device kernel that runs on the host
is still an op on device tensors). That is what the backend's own signals are for.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

# Ops that move bytes between devices. The value says where (src, dst) are found: an argument
# index, "out" for the result, or "host" for a value read back to Python.
COPY_OPS = {
    "aten._to_copy": (0, "out"),
    "aten.copy_": (1, 0),  # copy_(self=dst, src)
    "aten._copy_from": (0, 1),  # _copy_from(self=src, dst)
    "aten._copy_from_and_resize": (0, 1),
    "aten._local_scalar_dense": (0, "host"),  # .item(): a scalar read back to the host
}

try:  # private module, stable for years, but guarded like every private API
    from torch.utils._python_dispatch import TorchDispatchMode

    _IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - very old torch
    TorchDispatchMode, _IMPORT_ERROR = object, exc  # type: ignore[misc, assignment]


def availability() -> tuple[bool, str]:
    """(usable, reason): whether a dispatch-level recorder can run on this torch."""
    if _IMPORT_ERROR is not None:
        return False, f"torch.utils._python_dispatch.TorchDispatchMode unavailable: {_IMPORT_ERROR}"
    return True, "TorchDispatchMode"


def sees_compiled_code() -> tuple[bool, str]:
    """(yes, reason): whether the recorder stays on around compiled code at run time.

    Without ``TorchDispatchMode.ignore_compile_internals`` (added in torch 2.8) Dynamo skips
    any frame run under a mode, so in compile mode the recorder sees the eager ops instead.
    """
    ok, reason = availability()
    if not ok:
        return False, reason
    if not hasattr(TorchDispatchMode, "ignore_compile_internals"):
        import torch

        return False, (
            f"torch {torch.__version__} lacks TorchDispatchMode."
            "ignore_compile_internals: Dynamo skips frames under the recorder, so "
            "compile-mode ops are the eager ones"
        )
    return True, "ignore_compile_internals"


def op_name(func) -> str:
    """``aten.cumsum.default`` style: namespace, packet, overload."""
    return str(func)


def packet_key(name: str) -> str:
    """``aten.cumsum`` for any spelling a backend uses: aten::cumsum.out, aten.cumsum.default,
    cumsum (a bare name is taken as aten)."""
    name = name.strip().removeprefix("torch.ops.")
    if "::" in name:
        namespace, _, rest = name.partition("::")
    elif "." in name and name.split(".", 1)[0] in ("aten", "prims", "prim", "quantized"):
        namespace, _, rest = name.partition(".")
    else:
        namespace, rest = "aten", name
    return f"{namespace}.{rest.split('.', 1)[0]}"


def _tensors(value, found: list) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensors(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _tensors(item, found)
    return found


def _nbytes(t) -> int:
    return t.numel() * t.element_size()


@dataclass
class Recording:
    """What one recorded block executed.

    ops:    (op name, device type) -> calls. An op's device is that of its tensors; a 0-dim CPU
            tensor mixed with device tensors (a wrapped scalar) does not make it a host op.
    copies: (op name, src device, dst device) -> [calls, bytes]; cross-device only.
    host_sources: host storage address -> copies to another device that read it (so a buffer
            left on the host can be tied to the copies it causes each step).
    """

    ops: Counter = field(default_factory=Counter)
    copies: dict = field(default_factory=dict)
    host_sources: Counter = field(default_factory=Counter)

    def add_copy(self, name: str, src: str, dst: str, nbytes: int) -> None:
        entry = self.copies.setdefault((name, src, dst), [0, 0])
        entry[0] += 1
        entry[1] += nbytes


def _device_of(tensors) -> str | None:
    types = {t.device.type for t in tensors}
    if len(types) > 1:  # scalars wrapped as 0-dim CPU tensors ride along with device tensors
        types = {t.device.type for t in tensors if t.device.type != "cpu" or t.dim() > 0}
    if len(types) > 1:
        types.discard("cpu")
    return min(types) if types else None


class DispatchRecorder(TorchDispatchMode):
    """``with DispatchRecorder() as rec: step()`` then read ``rec.recording``."""

    def __init__(self):
        super().__init__()
        self.recording = Recording()
        self._lock = threading.Lock()  # backward may run on an autograd device thread

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._record(func, args, kwargs, out)
        except Exception:  # recording must never change what the case computes
            with self._lock:
                self.recording.ops[(op_name(func), "unrecorded")] += 1
        return out

    def _record(self, func, args, kwargs, out) -> None:
        name = op_name(func)
        where = COPY_OPS.get(packet_key(name))
        if where is not None:
            src, dst = _arg(where[0], args, out), _arg(where[1], args, out)
            if src is not None and (dst is not None or where[1] == "host"):
                dst_type = "cpu" if where[1] == "host" else dst.device.type
                if src.device.type != dst_type:
                    # .item() moves one element; a copy moves the whole source
                    nbytes = src.element_size() if where[1] == "host" else _nbytes(src)
                    with self._lock:
                        self.recording.add_copy(name, src.device.type, dst_type, nbytes)
                        if src.device.type == "cpu":
                            self.recording.host_sources[src.untyped_storage().data_ptr()] += 1
                    return
        device = _device_of(_tensors((args, kwargs, out), []))
        if device is not None:
            with self._lock:
                self.recording.ops[(name, device)] += 1


def _arg(where, args, out):
    """The tensor at an argument index or the result ("out"); None for "host" or a non-tensor."""
    import torch

    if where == "host":
        return None
    value = out if where == "out" else (args[where] if len(args) > where else None)
    return value if isinstance(value, torch.Tensor) else None
