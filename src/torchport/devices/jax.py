"""torchax: PyTorch on JAX (``--device jax``). Checked with torchax 0.0.13, jax[cpu] 0.10.2.

``import torchax`` renames PrivateUse1 to ``jax`` and registers a thin ``torch.jax`` (no
``synchronize``, no memory statistics). Nothing runs on it until ``torchax.enable_globally()``
(its torch-function and dispatch modes), and those global modes also catch host work in the
same process (a deep copy, float64 math): host work runs in ``host_scope()``, with the modes
off. There is no CPU fallback: an op without a lowering raises ``OperatorNotFound``, so a
host op cannot hide; strict mode is the only mode. Many ops (``F.linear``, ``einsum``, SDPA)
are lowered at the torch-function level, below which a dispatch recorder sees nothing: the
placement probe's function-level inventory counts them.

Waiting: ``torch.jax`` has no synchronize. The adapter waits for a step by reading its results
back, ``jax.block_until_ready`` on the arrays behind the step's output tensors, and records
that it did (``sync_method``). ``synchronize()`` alone can only ``jax.effects_barrier()``.

Compile: torchax registers no dynamo backend and Inductor has no code generator for ``jax``,
so compile mode is refused before compiling starts (``compile_backend.NoCompileBackend``:
``compile_fail`` with that reason); with a backend named by ``--compile-backend``, dynamo
skips every frame while torchax's dispatch mode is on, and the ladder records "not compiled:
all frames skipped" with dynamo's reason.
"""

from __future__ import annotations

import contextlib
import os

from torchport.devices.base import DeviceAdapter

INSTALL_HINT = "pip install torchax 'jax[cpu]' (torchax 0.0.13 needs torch <= 2.12)"


def _arrays(value, found: list) -> list:
    """The jax arrays behind every torchax tensor in a step's outputs."""
    if isinstance(value, dict):
        for item in value.values():
            _arrays(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _arrays(item, found)
    else:
        elem = getattr(value, "_elem", None)  # torchax.tensor.Tensor keeps its array here
        if elem is not None and hasattr(elem, "block_until_ready"):
            found.append(elem)
    return found


@contextlib.contextmanager
def _all_modes_off():
    import torch
    from torch.utils._python_dispatch import _disable_current_modes  # private: guarded

    with torch._C.DisableTorchFunction(), _disable_current_modes():
        yield


class JaxAdapter(DeviceAdapter):
    name = torch_type = "jax"
    backend_packages = ("torchax", "jax", "jaxlib")
    waits_by_reading_back = True

    def availability(self):
        try:
            import torchax  # noqa: F401
        except ImportError as exc:
            if getattr(exc, "name", None) in ("torchax", "jax"):
                return False, f"torchax is not installed ({INSTALL_HINT})"
            return False, f"torchax does not import here: {type(exc).__name__}: {exc}"
        except Exception as exc:  # e.g. on torch 2.13: "aten.prod has no overload ..."
            return False, f"torchax does not import here: {type(exc).__name__}: {exc}"
        import jax

        devices = ", ".join(sorted({d.platform for d in jax.devices()}))
        return True, f"torchax {torchax.__version__} on jax {jax.__version__} ({devices})"

    def prepare(self):
        super().prepare()
        import torchax

        torchax.enable_globally()  # nothing runs on "jax" until the modes are on

    def device(self):
        return "jax"

    def host_scope(self):
        """Every Python mode off for host work (torchax's global torch-function and dispatch
        modes among them), back on after.

        Not ``torchax.disable_temporarily()``: it trusts ``env.enabled``, which torchax's own
        ``model.to("jax")`` (``with env:``) sets to False on exit while the global modes stay
        on the stacks, so after the first move it disables nothing.
        """
        return _all_modes_off()

    def synchronize(self):
        import jax

        jax.effects_barrier()

    def wait_for(self, value):
        import jax

        arrays = _arrays(value, [])
        if arrays:
            jax.block_until_ready(arrays)
        else:
            jax.effects_barrier()

    @property
    def sync_method(self) -> str:
        return (
            "read back: jax.block_until_ready on the step's output arrays (torch.jax has "
            "no synchronize)"
        )

    def peak_memory_bytes(self):
        try:
            import jax

            stats = jax.devices()[self.index].memory_stats()
            return int(stats["peak_bytes_in_use"]) if stats else None
        except Exception:
            return None

    def peak_memory_reason(self):
        try:
            import jax

            device = jax.devices()[self.index]
            if device.memory_stats() is None:
                return f"jax's {device.platform} device keeps no memory_stats()"
        except Exception as exc:
            return f"jax memory_stats() failed: {type(exc).__name__}: {exc}"
        return "jax memory_stats() has no peak_bytes_in_use"

    def device_info(self):
        try:
            import jax

            devices = jax.devices()
            return {
                "device_type": "jax",
                "device_name": f"jax {devices[0].platform}: {devices[0].device_kind}",
                "device_count": len(devices),
            }
        except Exception as exc:
            return {"device_type": "jax", "device_count": 0, "error": repr(exc)}

    def numerics(self):
        found = super().numerics()
        with contextlib.suppress(Exception):
            import jax

            found["jax_default_matmul_precision"] = str(jax.config.jax_default_matmul_precision)
            found["jax_enable_x64"] = bool(jax.config.jax_enable_x64)
        return found

    def explain_failure(self, stage: str, exc: BaseException) -> str | None:
        """What a failure means on torchax, from the exception's type and where it was raised
        (never from its words)."""
        import traceback

        try:
            from torchax.tensor import OperatorNotFound
        except Exception:
            OperatorNotFound = ()  # noqa: N806
        if OperatorNotFound and isinstance(exc, OperatorNotFound):
            return "torchax has no lowering for this op and no CPU fallback (OperatorNotFound)"
        frames = traceback.extract_tb(exc.__traceback__)
        if (
            isinstance(exc, AssertionError)
            and frames
            and frames[-1].name == "__torch_dispatch__"
            and "torchax" in frames[-1].filename
            and any(f"torch{os.sep}_library" in f.filename for f in frames)
        ):
            return (
                "torchax: a torch.library custom op reaches torchax's tensor below the autograd "
                "key with torchax's modes off, where its tensors refuse to compute: the op needs "
                "an implementation torchax itself runs"
            )
        if any(f.name == "backward" and "torch" in f.filename for f in frames) and isinstance(
            exc, RuntimeError
        ):
            return (
                "torchax: the training backward cannot run through torch autograd: ops "
                "lowered at the torch-function level (F.linear, einsum, SDPA) return "
                "tensors with no grad_fn"
            )
        return None

    def strict_note(self) -> str:
        return (
            "always strict: torchax has no CPU fallback (a missing lowering raises "
            "OperatorNotFound)"
        )
