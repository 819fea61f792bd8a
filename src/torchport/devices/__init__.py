"""Device adapters, found through the ``torchport.devices`` entry-point group."""

from __future__ import annotations

from torchport import plugins
from torchport.devices.base import DeviceAdapter

# Preference order for "the best available device".
PREFERENCE = ("cuda", "xpu", "mps", "cpu")


class UnknownDevice(LookupError):
    pass


def _entry_points() -> dict[str, str]:
    return plugins.targets("torchport.devices")


def device_names() -> list[str]:
    return sorted(_entry_points())


def get_adapter(name: str) -> DeviceAdapter:
    """The adapter for a device name such as ``cuda`` or ``cuda:1`` (the index is kept).

    A name no adapter claims may be the registered PrivateUse1 backend's own name (``tpu``,
    ``neuron`` without torchport's adapter, a vendor's next one): then the generic PrivateUse1
    adapter serves it under that name. Asking which name PrivateUse1 has imports torch (and
    the backend), so it happens only for names no adapter claims.
    """
    family, sep, index = name.partition(":")
    target = _entry_points().get(family)
    if target is None:
        from torchport.devices import privateuse1

        registered = privateuse1.registered_name()
        if registered != family:
            hint = (
                f"; the PrivateUse1 backend here is '{registered}'"
                if registered
                else f"; a PrivateUse1 backend is known by its own name once it autoloads or "
                f"{privateuse1.MODULE_ENV} names its module (none is registered here)"
            )
            raise UnknownDevice(
                f"unknown device '{name}'; known: {', '.join(device_names())}"
                f"{hint} ('torchport doctor' shows which are usable here)"
            )
    if sep and not (index.isdigit() and str(int(index)) == index):
        raise UnknownDevice(
            f"device '{name}': the index must be a non-negative integer, e.g. {family}:1"
        )
    if target is None:
        from torchport.devices.privateuse1 import PrivateUse1Adapter

        adapter: DeviceAdapter = PrivateUse1Adapter(by_name=family)
    else:
        adapter = plugins.load(target)()
    adapter.index = int(index) if sep else 0
    return adapter


def best_available() -> str:
    for name in PREFERENCE:
        ok, _ = get_adapter(name).availability()
        if ok:
            return name
    return "cpu"
