"""The standard accelerator API, tried first for any device (docs/design.md rule 1).

``torch.accelerator`` (synchronize, device_count), ``torch.accelerator.memory`` (memory
statistics) and ``torch.Event`` on ``torch.accelerator.current_stream()`` serve every backend
that registers with torch's device-generic runtime: CUDA, XPU, MPS, and the out-of-tree C++
backends (OpenReg, TorchTPU, TorchNeuron), whose own device modules may lack what CUDA's has
(``torch.openreg`` has no ``synchronize``). A device module's function (``torch.<name>.*``)
is used only where the standard one is missing or refuses the device, and each figure says which
answered (a ``Route``).

The standard API serves a device only when ``torch.accelerator.current_accelerator()`` is that
device type *and* the call works: a Python PrivateUse1 backend (simdev) is named the current
accelerator but its device guard cannot synchronise and it has no caching allocator, so the
call raises and the device module answers instead, with the reason kept. Parts of the API are
newer than torch 2.9 (``torch.accelerator.memory``): each is looked up with ``getattr`` and a
missing one is a recorded reason, never an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

STANDARD = "torch.accelerator"


@dataclass(frozen=True)
class Route:
    """Which API answers one question for a device: ``how`` (shown and recorded; None when
    nothing answers), ``call`` (None likewise) and ``why_not`` (why the standard API did not
    answer; empty when it did)."""

    how: str | None
    call: Callable | None
    why_not: str = ""

    @property
    def standard(self) -> bool:
        return self.how is not None and self.how.startswith(STANDARD)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:160]}" if lines else type(exc).__name__


def serves(device_type: str) -> tuple[bool, str]:
    """(True, "") when torch.accelerator names ``device_type`` as the current accelerator,
    else (False, why)."""
    import torch

    api = getattr(torch, "accelerator", None)
    current_fn = getattr(api, "current_accelerator", None)
    if current_fn is None:
        return False, f"torch {torch.__version__} has no torch.accelerator.current_accelerator"
    try:
        current = current_fn()
    except Exception as exc:
        return False, f"torch.accelerator.current_accelerator() raised {_first_line(exc)}"
    if current is None:
        return False, "torch.accelerator names no accelerator in this process"
    if current.type != device_type:
        return False, f"torch.accelerator's accelerator is {current.type}, not {device_type}"
    return True, ""


def _standard_function(name: str) -> tuple[Callable | None, str]:
    """``torch.accelerator.memory.<name>`` or ``torch.accelerator.<name>`` (older torch), with
    where it was found, or (None, why)."""
    import torch

    api = getattr(torch, "accelerator", None)
    for owner, where in ((getattr(api, "memory", None), "memory."), (api, "")):
        fn = getattr(owner, name, None)
        if callable(fn):
            return fn, f"{STANDARD}.{where}{name}()"
    return None, f"torch {torch.__version__} has no {STANDARD}.memory.{name}"


def module_route(device_type: str, name: str, why_not: str) -> Route:
    import torch

    fn = getattr(getattr(torch, device_type, None), name, None)
    if callable(fn):
        return Route(f"torch.{device_type}.{name}()", fn, why_not)
    missing = f"torch.{device_type} has no {name}"
    return Route(None, None, f"{why_not}; {missing}" if why_not else missing)


def _touch(device_type: str, index: int) -> None:
    """Put one element on the device, so that a trial call meets the device as a step will:
    some backends answer an untouched device without doing anything (a Python backend's
    synchronize succeeds before its first tensor and raises after it)."""
    import torch

    torch.empty(1, device=f"{device_type}:{index}")


def synchronize_route(device_type: str, index: int) -> Route:
    """How to wait for all work on device ``index``; the standard call is tried once here."""
    ok, why = serves(device_type)
    if ok:
        import torch

        sync = getattr(torch.accelerator, "synchronize", None)
        if sync is None:
            why = f"torch {torch.__version__} has no {STANDARD}.synchronize"
        else:
            try:
                _touch(device_type, index)
                sync(index)
            except Exception as exc:
                why = f"{STANDARD}.synchronize() raised {_first_line(exc)}"
            else:
                return Route(f"{STANDARD}.synchronize()", lambda: sync(index))
    return module_route(device_type, "synchronize", why)


def memory_route(device_type: str, name: str, index: int) -> Route:
    """How to call memory statistic ``name`` (``max_memory_allocated``,
    ``reset_peak_memory_stats``, ``memory_allocated``) for device ``index``. The standard API
    is proven with a read (``memory_allocated``) before it is trusted."""
    ok, why = serves(device_type)
    if ok:
        fn, where = _standard_function(name)
        probe, _ = _standard_function("memory_allocated")
        if fn is None:
            why = where
        else:
            try:
                _touch(device_type, index)
                if probe is not None:
                    probe(index)
            except Exception as exc:
                why = f"{STANDARD}.memory.memory_allocated() raised {_first_line(exc)}"
            else:
                return Route(where, lambda: fn(index))
    return module_route(device_type, name, why)


def device_count_route(device_type: str) -> Route:
    ok, why = serves(device_type)
    if ok:
        import torch

        count = getattr(torch.accelerator, "device_count", None)
        if callable(count):
            return Route(f"{STANDARD}.device_count()", count)
        why = f"torch {torch.__version__} has no {STANDARD}.device_count"
    return module_route(device_type, "device_count", why)


def event_timing(device_type: str, index: int) -> tuple[Callable | None, str]:
    """A maker of timing events for the device (``torch.Event(device, enable_timing=True)``)
    once two of them have timed an interval on ``torch.accelerator.current_stream()``, else
    (None, why). Callers synchronise the device through ``synchronize_route`` as well."""
    import torch

    ok, why = serves(device_type)
    if not ok:
        return None, why
    event_cls = getattr(torch, "Event", None)
    if event_cls is None or not hasattr(torch.accelerator, "current_stream"):
        return None, f"torch {torch.__version__} has no torch.Event or current_stream"
    device = f"{device_type}:{index}"

    def make():
        return event_cls(device=device, enable_timing=True)

    try:
        start, end = make(), make()
        stream = torch.accelerator.current_stream(index)
        start.record(stream)
        end.record(stream)
        end.synchronize()
        elapsed = float(start.elapsed_time(end))
    except Exception as exc:
        return None, f"torch.Event timing on {device_type} raised {_first_line(exc)}"
    if not elapsed >= 0.0:
        return None, f"torch.Event.elapsed_time on {device_type} answered {elapsed!r}"
    return make, ""
