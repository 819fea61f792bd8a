"""hostdev: a test backend whose device kernels compute on host bytes, for proving that the
placement evidence keeps real fallbacks apart from host work inside kernels.

A PrivateUse1 backend under its own name (``hostdev``) with no adapter of its own: torchport
meets it as a vendor's new out-of-tree backend, through the generic PrivateUse1 adapter:

    TORCHPORT_PRIVATEUSE1_MODULE=torchport.devices.hostdev torchport run --device hostdev

Importing this module installs it. Its planted faults, each a thing real young backends do:

host kernels        every native kernel computes with CPU aten ops that a profiler sees nested
                    inside the device op (evidence class d: not a fallback, a ``host_kernel``
                    finding). The dispatcher says these ops have the backend's own kernel.
silent fallback     ``SILENT`` ops reach the boxed fallback with no warning and no op
                    accounting (only the dispatcher can tell: class a).
warned fallback     every other op without a kernel (``WARNED`` and those simdev leaves out)
                    warns "operator aten::X fell back to CPU" (class b, heard by the generic
                    warning reader).
wrong kernel        ``aten::relu`` returns its result + 1 (the convnet fails parity).
buffers left behind its ``Module.to`` leaves non-persistent buffers on the host (class c).

It keeps no op list and registers a torch.compile backend under its name.
"""

from __future__ import annotations

NAME = "hostdev"
SILENT = ("cumsum", "sort", "topk", "index_select", "embedding_dense_backward")
WARNED = ("gather", "masked_fill")
MESSAGE = "operator aten::{op} fell back to CPU"
WRONG = ("relu",)

_state: dict = {"installed": False, "libs": []}


def install() -> None:
    """Make ``hostdev`` a torch device in this process (once; PrivateUse1 is named once)."""
    if _state["installed"]:
        return
    import functools

    import torch

    from torchport.devices import simdev_backend as sim

    native = set(sim.resolve_native_ops(None)) - set(SILENT) - set(WARNED) - set(WRONG)
    sim.install(
        native_ops=sorted(native),
        name=NAME,
        # simdev formats with the schema name (aten::gather): the message names it once
        fallback_message=MESSAGE.replace("aten::{op}", "{op}"),
        silent_fallback=SILENT,
        host_compute=True,
    )
    lib = torch.library.Library("aten", "IMPL")
    for name in WRONG:
        for overload in sim._overloads(name, strict=True):
            lib.impl(overload, functools.partial(sim._wrong_kernel, overload), "PrivateUse1")
    sim.keep_non_persistent_buffers_on_host(NAME)
    _state["libs"].append(lib)
    _state["installed"] = True


def autoload() -> None:
    """The ``torch.backends`` entry-point hook: torch calls it on ``import torch``."""
    install()


install()
