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
    """The adapter for a device name such as ``cuda`` or ``cuda:1`` (index is ignored)."""
    family = name.split(":", 1)[0]
    target = _entry_points().get(family)
    if target is None:
        raise UnknownDevice(f"unknown device '{name}'; known: {', '.join(device_names())} "
                            "('torchport doctor' shows which are usable here)")
    return plugins.load(target)()


def best_available() -> str:
    for name in PREFERENCE:
        ok, _ = get_adapter(name).availability()
        if ok:
            return name
    return "cpu"
