"""quirkdev: a test backend that does not tell the truth, for proving the placement probe.

A PrivateUse1 backend under its own name (``quirkdev``), built on simdev's machinery but with
no adapter of its own: torchport meets it as it would meet a vendor's new out-of-tree backend,
through the generic PrivateUse1 adapter, by its name:

    TORCHPORT_PRIVATEUSE1_MODULE=torchport.devices.quirkdev torchport run --device quirkdev

(or autoloaded through the ``torch.backends`` entry-point group: ``autoload`` is that hook).
Importing this module installs it. Its planted quirks, each a thing real backends do:

silent fallback     ``aten::embedding_dense_backward`` runs on the CPU through the backend's
                    boxed fallback with no warning and no op accounting (llama, gpt2, qwen3_moe
                    backward).
warned fallback     every other op without a kernel (``cumsum``, ``_index_put_impl_``: qwen3_moe)
                    runs on the CPU with a warning worded the vendor's way, which no adapter
                    pattern knows.
host inside         ``aten::relu`` has a device kernel that copies its input to the host,
                    computes there and copies back (the convnet).
buffers left behind its ``Module.to`` leaves non-persistent buffers on the host (the rotary
                    ``inv_freq`` of llama and qwen3_moe), so every step copies them.
wrong in training   ``native_batch_norm`` in training mode does not update the running
                    statistics (eval mode is right): the BatchNorm case fails parity only
                    because running-stat updates are compared.

It keeps no op list and registers a torch.compile backend under its name (Inductor has no code
generator for it).
"""

from __future__ import annotations

NAME = "quirkdev"
SILENT = ("aten::embedding_dense_backward",)
# Its own words, not Neuron's or MPS's: only a generic fallback-warning reader hears it.
MESSAGE = "[quirkdev] {op} has no device implementation yet; falling back to the CPU"
HOST_INSIDE = ("relu.default",)
TRAINING_WRONG = ("native_batch_norm.default",)

_state: dict = {"installed": False, "libs": []}


def _host_inside(op, *args, **kwargs):
    """A 'device kernel' that computes on the host: copy in, compute on the CPU, copy back.

    The copies and the CPU op go through the dispatcher, so torch.profiler sees them nested
    inside the device op; the backend itself reports the op as its own kernel."""
    import torch
    from torch.utils._pytree import tree_map

    device = next(a.device for a in args if isinstance(a, torch.Tensor))

    def to_host(x):
        return x.cpu() if isinstance(x, torch.Tensor) and x.device == device else x

    out = op(*tree_map(to_host, args), **tree_map(to_host, kwargs))
    return tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, out)


def _batch_norm_training_wrong(op, native_kernel, *args, **kwargs):
    """native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
    eps): in training mode the running statistics are left as they were."""
    given = list(args)
    if len(given) > 5 and given[5] and given[3] is not None:
        given[3], given[4] = given[3].clone(), given[4].clone()  # updates land on copies
    return native_kernel(*given, **kwargs)


def install() -> None:
    """Make ``quirkdev`` a torch device in this process (once; PrivateUse1 is named once)."""
    if _state["installed"]:
        return
    import functools

    import torch

    from torchport.devices import simdev_backend as sim

    replaced = {n.split(".")[0] for n in HOST_INSIDE + TRAINING_WRONG}
    native = set(sim.resolve_native_ops(None)) - replaced
    sim.install(
        native_ops=sorted(native), name=NAME, fallback_message=MESSAGE, silent_fallback=SILENT
    )
    lib = torch.library.Library("aten", "IMPL")
    for name in HOST_INSIDE:
        for overload in sim._overloads(name, strict=True):
            lib.impl(overload, functools.partial(_host_inside, overload), "PrivateUse1")
    for name in TRAINING_WRONG:
        for overload in sim._overloads(name, strict=True):
            kernel = functools.partial(sim._native_kernel, overload)
            lib.impl(
                overload,
                functools.partial(_batch_norm_training_wrong, overload, kernel),
                "PrivateUse1",
            )
    sim.keep_non_persistent_buffers_on_host(NAME)
    _state["libs"].append(lib)
    _state["installed"] = True


def autoload() -> None:
    """The ``torch.backends`` entry-point hook: torch calls it on ``import torch``."""
    install()


install()
