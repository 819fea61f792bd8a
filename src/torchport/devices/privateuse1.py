"""Any other PrivateUse1 backend (a vendor's out-of-tree device torchport has no file for).

torch names PrivateUse1 after the backend when it loads: through the ``torch.backends``
entry-point group on ``import torch`` (autoload), or when the module named in
``TORCHPORT_PRIVATEUSE1_MODULE`` is imported. ``--device NAME`` reaches this adapter by that
name (``devices.get_adapter``), as does ``--device privateuse1``; either way the run records
both names (``device_info``). The adapter uses the device module the backend registered
(``torch.<name>``). It knows none of the backend's own fallback signals: the placement probe
relies on evidence that needs none (the dispatcher, host work nested in device ops, the
recorder) and on the generic fallback-warning patterns.
"""

from torchport import settings
from torchport.devices.base import DeviceAdapter

MODULE_ENV = "TORCHPORT_PRIVATEUSE1_MODULE"
UNCLAIMED = "privateuseone"  # torch's name for PrivateUse1 before a backend renames it
GENERIC = "privateuse1"  # this adapter's own name (``--device privateuse1``)


def load_backend() -> None:
    """Import the module ``TORCHPORT_PRIVATEUSE1_MODULE`` names (autoloaded ones come with
    ``import torch``)."""
    module = settings.value(MODULE_ENV)
    if module:
        __import__(module)


def registered_name() -> str | None:
    """The PrivateUse1 backend's own name in this process, or None when none is registered
    (or the backend cannot be loaded: ``availability`` says why)."""
    try:
        load_backend()
        import torch

        name = torch._C._get_privateuse1_backend_name()  # private: guarded
    except Exception:
        return None
    return None if name == UNCLAIMED else name


class PrivateUse1Adapter(DeviceAdapter):
    name = GENERIC

    def __init__(self, by_name: str | None = None):
        # Reached by the backend's own name: that is the device's name in records and views.
        if by_name:
            self.name = by_name

    @property
    def torch_type(self) -> str:  # type: ignore[override]
        import torch

        return torch._C._get_privateuse1_backend_name()

    def _load(self) -> None:
        load_backend()

    def availability(self):
        try:
            self._load()
            import torch

            backend = torch._C._get_privateuse1_backend_name()  # private: guarded
        except (ImportError, AttributeError) as exc:
            return False, f"cannot load or name the PrivateUse1 backend: {exc!r}"
        if backend == UNCLAIMED:
            return False, (
                "no PrivateUse1 backend is registered (install one that autoloads, "
                f"or name its module in {MODULE_ENV})"
            )
        mod = self.module()
        if mod is None or not getattr(mod, "is_available", lambda: True)():
            return False, f"PrivateUse1 backend '{backend}' has no available device module"
        return True, f"PrivateUse1 backend '{backend}'"

    def prepare(self):
        super().prepare()
        self._load()

    def device_info(self):
        count_fn = self.route("device_count").call
        count = count_fn() if count_fn is not None else 0
        return {
            "device_type": self.torch_type,
            "device_name": self.torch_type,
            "device_count": count,
            "dispatch_key": "PrivateUse1",
            "privateuse1_backend": self.torch_type,
            "adapter": f"{GENERIC} (generic: torchport has no adapter of its own for "
            f"'{self.torch_type}')",
            "api": self.api_used(),
        }
