"""accdev: a test backend reached only through the standard accelerator API.

A PrivateUse1 backend under its own name (``accdev``), built on simdev's machinery, with no
adapter of its own (torchport meets it through the generic PrivateUse1 adapter), as a C++
out-of-tree backend (OpenReg, TorchTPU, TorchNeuron) is met:

    TORCHPORT_PRIVATEUSE1_MODULE=torchport.devices.accdev torchport run --device accdev

Importing this module installs it. What makes it the test of the accelerator-API adapter:

no device-module API   ``torch.accdev`` has no ``synchronize``, ``memory_allocated`` or
                       ``max_memory_allocated``: whatever reads them finds nothing.
torch.accelerator      ``torch.accelerator.synchronize`` and ``torch.accelerator.memory``'s
                       ``memory_allocated`` / ``max_memory_allocated`` /
                       ``reset_peak_memory_stats`` answer for it (a Python backend cannot reach
                       torch's C++ accelerator hooks, so this process's ``torch.accelerator``
                       functions are wrapped to answer for accdev and pass other devices on).
queued work            every kernel launch queues ``KERNEL_S`` seconds of "device work" (env
                       ``TORCHPORT_ACCDEV_KERNEL_S``) that only ``torch.accelerator.synchronize``
                       waits for: a timer that does not synchronise through the standard API
                       times the launches, not the work. (Results are readable at once: the
                       queue is a clock, not a deferral.)
"""

from __future__ import annotations

import threading
import time

from torchport import settings

NAME = "accdev"
KERNEL_S_ENV = "TORCHPORT_ACCDEV_KERNEL_S"
KERNEL_S = 0.002  # the default of TORCHPORT_ACCDEV_KERNEL_S (settings.py)

_state: dict = {"installed": False, "busy_until": 0.0, "peak": 0, "waits": 0}
_lock = threading.Lock()


def kernel_s() -> float:
    return float(settings.value(KERNEL_S_ENV))


def _launched(name: str) -> None:
    from torchport.devices import simdev_backend as sim

    now = time.perf_counter()
    with _lock:
        _state["busy_until"] = max(now, _state["busy_until"]) + kernel_s()
        _state["peak"] = max(_state["peak"], sim.memory_allocated())


def synchronize(device=None) -> None:
    """Wait for the queued work (what torch.accelerator.synchronize does for accdev)."""
    with _lock:
        wait = _state["busy_until"] - time.perf_counter()
        _state["waits"] += 1
    if wait > 0:
        time.sleep(wait)


def memory_allocated(device=None) -> int:
    from torchport.devices import simdev_backend as sim

    return sim.memory_allocated()


def max_memory_allocated(device=None) -> int:
    with _lock:
        _state["peak"] = max(_state["peak"], memory_allocated())
        return _state["peak"]


def reset_peak_memory_stats(device=None) -> None:
    with _lock:
        _state["peak"] = memory_allocated()


def waits() -> int:
    """How many times the device was waited on (tests read it)."""
    return _state["waits"]


def _answering(standard, own):
    """``own`` for accdev (the current accelerator here), the standard function otherwise."""

    def call(device=None, *args, **kwargs):
        import torch

        given = torch.device(device) if isinstance(device, str) else device
        if given is None or isinstance(given, int) or given.type == NAME:
            return own(device)
        return standard(device, *args, **kwargs)

    return call


def install() -> None:
    """Make ``accdev`` a torch device in this process (once; PrivateUse1 is named once)."""
    if _state["installed"]:
        return
    import torch

    from torchport.devices import simdev_backend as sim

    sim.install(name=NAME)
    sim._state["on_launch"] = _launched
    module = getattr(torch, NAME)
    for missing in ("synchronize", "memory_allocated", "max_memory_allocated"):
        if hasattr(module, missing):
            delattr(module, missing)
    accelerator = torch.accelerator
    accelerator.synchronize = _answering(accelerator.synchronize, synchronize)
    memory = getattr(accelerator, "memory", None)
    for owner in [o for o in (accelerator, memory) if o is not None]:
        for fn in (memory_allocated, max_memory_allocated, reset_peak_memory_stats):
            standard = getattr(owner, fn.__name__, None)
            if standard is not None:
                setattr(owner, fn.__name__, _answering(standard, fn))
    _state["installed"] = True


def autoload() -> None:
    """The ``torch.backends`` entry-point hook: torch calls it on ``import torch``."""
    install()


install()
