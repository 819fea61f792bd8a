"""The op inventory at the torch-function level: every torch function called on tensors.

Some backends lower ops before the dispatcher: torchax turns ``F.linear``, ``einsum`` and SDPA
into JAX at the ``__torch_function__`` level, so a dispatch-level recorder never sees them
(the FLOP counter "saw no matmul"). A ``TorchFunctionMode`` pushed on top of the backend's own
sees each call first, with its tensors' devices, and passes it on unchanged.
"""

from __future__ import annotations

import threading
from collections import Counter

try:  # public since 1.x, guarded like every torch API the tool leans on
    from torch.overrides import TorchFunctionMode

    _IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - very old torch
    TorchFunctionMode, _IMPORT_ERROR = object, exc  # type: ignore[misc, assignment]

# Tensor attribute reads and plumbing, not ops: left out of the inventory.
SKIP = frozenset(
    {
        "__get__",
        "__set__",
        "size",
        "dim",
        "stride",
        "numel",
        "is_floating_point",
        "requires_grad_",
        "data_ptr",
        "element_size",
        "__len__",
        "__repr__",
        "__format__",
        "is_complex",
        "storage_offset",
        "untyped_storage",
        "has_names",
        "is_contiguous",
        "get_device",
        "_is_view",
        "nelement",
        "ndimension",
    }
)


def function_name(func) -> str:
    name = getattr(func, "__name__", None) or repr(func)
    module = getattr(func, "__module__", None) or ""
    if module.startswith("torch.nn.functional"):
        return f"F.{name}"
    if module == "torch._C._TensorBase" or module.startswith("torch._tensor"):
        return f"Tensor.{name}"
    return f"torch.{name}" if module.startswith("torch") else name


def _device(args, kwargs) -> str | None:
    import torch

    found = set()

    def visit(value):
        if isinstance(value, torch.Tensor):
            found.add(value.device.type)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)

    visit(args)
    visit(kwargs)
    if len(found) > 1:
        found.discard("cpu")
    return min(found) if found else None


class FunctionRecorder(TorchFunctionMode):
    """``with FunctionRecorder() as rec: step()`` -> ``rec.calls``: (name, device) -> calls."""

    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()
        self._lock = threading.Lock()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in SKIP:
            try:
                device = _device(args, kwargs)
                if device is not None:
                    with self._lock:
                        self.calls[(function_name(func), device)] += 1
            except Exception:  # recording must never change what the case computes
                pass
        return func(*args, **kwargs)


def rows(calls: Counter, limit: int = 60) -> list[dict]:
    ranked = sorted(calls.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"op": op, "device": dev, "count": n} for (op, dev), n in ranked[:limit]]
