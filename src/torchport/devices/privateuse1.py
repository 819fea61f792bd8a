"""Any other PrivateUse1 backend (a vendor's out-of-tree device torchport has no file for).

torch names PrivateUse1 after the backend when it loads: through the ``torch.backends``
entry-point group on ``import torch`` (autoload), or when the module named in
``TORCHPORT_PRIVATEUSE1_MODULE`` is imported. The adapter reads that name and uses the device
module the backend registered (``torch.<name>``). It knows nothing of the backend's fallback
signals, so the placement probe relies on its dispatch-level recorder alone.
"""

import os

from torchport.devices.base import DeviceAdapter

MODULE_ENV = "TORCHPORT_PRIVATEUSE1_MODULE"
UNCLAIMED = "privateuseone"   # torch's name for PrivateUse1 before a backend renames it


class PrivateUse1Adapter(DeviceAdapter):
    name = "privateuse1"

    @property
    def torch_type(self) -> str:
        import torch
        return torch._C._get_privateuse1_backend_name()

    def _load(self) -> None:
        module = os.environ.get(MODULE_ENV)
        if module:
            __import__(module)

    def availability(self):
        try:
            self._load()
            import torch
            backend = torch._C._get_privateuse1_backend_name()  # private: guarded
        except (ImportError, AttributeError) as exc:
            return False, f"cannot load or name the PrivateUse1 backend: {exc!r}"
        if backend == UNCLAIMED:
            return False, ("no PrivateUse1 backend is registered (install one that autoloads, "
                           f"or name its module in {MODULE_ENV})")
        mod = self.module()
        if mod is None or not getattr(mod, "is_available", lambda: True)():
            return False, f"PrivateUse1 backend '{backend}' has no available device module"
        return True, f"PrivateUse1 backend '{backend}'"

    def prepare(self):
        super().prepare()
        self._load()

    def device_info(self):
        mod = self.module()
        count = getattr(mod, "device_count", lambda: 0)() if mod is not None else 0
        return {"device_type": self.torch_type, "device_name": self.torch_type,
                "device_count": count}
