"""TorchTPU (``torch_tpu``, Google's native PyTorch backend for TPUs; PrivateUse1 ``tpu``).

Read from the installed package, torch_tpu 0.2.0 (what this machine ran: docs/backends.md):
- It autoloads through the ``torch.backends`` entry-point group, but renames PrivateUse1 to
  ``tpu`` and registers ``torch.tpu`` only when TPU chips are found on the PCI bus. Without
  chips ``torch.device("tpu")`` is an unknown device string: ``availability`` says which.
- CPU fallback is a switch, ``torch.tpu.enable_cpu_fallback`` (False: strict); the fallback
  goes through ``at::native::cpu_fallback`` and warns "Operator '<op>' is not implemented for
  TPU. Falling back to CPU". Every TorchTPU warning starts with a category prefix such as
  ``<TorchTpu/Performance/>``: the adapter keeps all of them (``backend_warnings``).
- It monkey-patches ``torch.compile`` (no backend given: ``tpu`` for TPU inputs; dynamic=False)
  and ``torch.set_float32_matmul_precision`` (TPU precision, default "medium": float32 matmuls
  at reduced precision). The adapter records the precision it found and sets "highest" so
  parity compares float32 with float32.
- Eager mode defers and fuses ops: time only after ``torch.tpu.synchronize()``.
- Compile-cache counters ``torch.tpu._get_cache_requests/_hits/_misses()``; HBM use in
  ``_hbm_usage_summary()``.
"""

from __future__ import annotations

import contextlib
import os
import warnings

from torchport import settings
from torchport.devices.base import DeviceAdapter

STRICT_ENV = "TORCHPORT_TPU_STRICT"
WARNING_PREFIX = "<TorchTpu/"
PARITY_PRECISION = "highest"


class TPUAdapter(DeviceAdapter):
    name = torch_type = "tpu"
    default_compile_backend = "tpu"
    backend_packages = ("torch_tpu", "libtpu")
    strict_env = {STRICT_ENV: "1"}  # read in prepare(): the switch is a Python attribute
    fallback_patterns = (
        r"Operator '(?P<op>[^']+)' is not implemented for TPU\. "
        r"Falling back to CPU",
    )

    def __init__(self):
        self.found_precision: str | None = None
        self.warnings_heard: list[str] = []

    def availability(self):
        from importlib import metadata

        try:
            version = metadata.version("torch_tpu")
        except metadata.PackageNotFoundError:
            return False, "torch_tpu is not installed (pip install torch_tpu; TPU hosts only)"
        import torch

        mod = getattr(torch, "tpu", None)
        if mod is None:
            chips = _chips_on_bus()
            return False, (
                f"torch_tpu {version} installed; no TPU chips found ({chips}), so "
                "it registered no 'tpu' device"
            )
        try:
            count = torch.accelerator.device_count()  # torch.tpu.is_available refuses callers
        except Exception:
            count = getattr(mod, "device_count", lambda: 0)()
        if not count:
            return False, (
                f"torch_tpu {version} installed; no TPU chips found "
                f"({_chips_on_bus()}): torch.tpu is there but no 'tpu' device is"
            )
        return True, f"torch_tpu {version}: {count} TPU chip(s)"

    def environment_warnings(self) -> list[str]:
        """torch_tpu installed on a host without TPU chips: libtpu, loaded with it on ``import
        torch``, retries its GCP instance-metadata lookups (30 tries per variable), which can
        stall a CPU run here for minutes (seen with the ``hf`` suite on the CPU)."""
        from importlib import metadata

        import torch

        try:
            version = metadata.version("torch_tpu")
        except metadata.PackageNotFoundError:
            return []
        if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0" or getattr(torch, "tpu", None):
            return []  # not loaded, or chips found (torch.tpu is registered only then)
        return [
            f"torch_tpu {version} is installed and no TPU chips were found: a run on another "
            "device in this environment can stall for minutes while libtpu retries its GCP "
            "metadata lookups; set TORCH_DEVICE_BACKEND_AUTOLOAD=0 for such runs (torch_tpu "
            "is then not loaded), or use an environment without torch_tpu"
        ]

    def prepare(self):
        super().prepare()
        import torch

        try:
            import torch_tpu  # noqa: F401  (autoloaded already unless autoload is off)
            from torch_tpu import _loader

            _loader.load()
        except ImportError:
            pass
        self._hear_prefixed_warnings()
        mod = getattr(torch, "tpu", None)
        if mod is None:
            return
        if settings.value(STRICT_ENV):
            mod.enable_cpu_fallback = False
        self.found_precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(PARITY_PRECISION)  # patched by torch_tpu: TPU-wide

    def _hear_prefixed_warnings(self):
        previous = warnings.showwarning
        heard = self.warnings_heard

        def showwarning(message, category, filename, lineno, file=None, line=None):
            text = str(message)
            if text.startswith(WARNING_PREFIX) and len(heard) < 200:
                heard.append(text[:300])
            return previous(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning

    def backend_warnings(self) -> list[str]:
        """Every ``<TorchTpu/...>`` warning heard in this process (first 200)."""
        return list(self.warnings_heard)

    defers_ops = True  # ops are traced and fused until a synchronisation

    def synchronize(self):
        import torch

        torch.tpu.synchronize()

    @property
    def sync_method(self) -> str:
        return "torch.tpu.synchronize() (eager ops are deferred and fused until then)"

    def peak_memory_bytes(self):
        try:
            import torch

            return int(torch.accelerator.max_memory_allocated())
        except Exception:
            return None

    def peak_memory_reason(self):
        try:
            import torch

            summary = torch.tpu._hbm_usage_summary()
        except Exception as exc:
            return f"no peak memory from torch.accelerator or torch.tpu ({type(exc).__name__})"
        return f"no peak from torch.accelerator; HBM now: {str(summary)[:200]}"

    def device_info(self):
        import torch

        mod = getattr(torch, "tpu", None)
        if mod is None:
            return {"device_type": "tpu", "device_count": 0, "chips_on_bus": _chips_on_bus()}
        info = {"device_type": "tpu", "device_count": mod.device_count()}
        with contextlib.suppress(Exception):
            info["device_name"] = mod.get_device_name(self.index)
        return info

    def numerics(self):
        import torch

        found = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
        if self.found_precision is not None:
            found["tpu_matmul_precision_found"] = self.found_precision
            found["note"] = (
                f"TorchTPU's float32 matmul precision was {self.found_precision!r}"
                f"; set to {PARITY_PRECISION!r} for parity"
            )
        mod = getattr(torch, "tpu", None)
        with contextlib.suppress(Exception):
            found["tpu_eager_mode"] = str(mod.eager_mode)
            found["tpu_enable_cpu_fallback"] = bool(mod.enable_cpu_fallback)
        return found

    def strict_note(self):
        return "torch.tpu.enable_cpu_fallback = False (an op without a TPU kernel raises)"

    def compile_cache_counters(self):
        try:
            import torch

            mod = torch.tpu
            return {
                "requests": int(mod._get_cache_requests()),
                "hits": int(mod._get_cache_hits()),
                "misses": int(mod._get_cache_misses()),
            }
        except Exception as exc:
            return f"unavailable: torch.tpu cache counters: {type(exc).__name__}: {exc}"


def _chips_on_bus() -> str:
    try:
        from torch_tpu._internal.utils import hardware  # private: guarded

        return f"{hardware.get_tpu_device_count()} on the PCI bus"
    except Exception as exc:
        return f"could not scan the PCI bus: {type(exc).__name__}"
