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
    """The adapter for a device name such as ``cuda`` or ``cuda:1`` (the index is kept)."""
    family, sep, index = name.partition(":")
    target = _entry_points().get(family)
    if target is None:
        raise UnknownDevice(f"unknown device '{name}'; known: {', '.join(device_names())} "
                            "('torchport doctor' shows which are usable here)")
    if sep and not (index.isdigit() and str(int(index)) == index):
        raise UnknownDevice(f"device '{name}': the index must be a non-negative integer, "
                            f"e.g. {family}:1")
    adapter = plugins.load(target)()
    adapter.index = int(index) if sep else 0
    return adapter


def best_available() -> str:
    for name in PREFERENCE:
        ok, _ = get_adapter(name).availability()
        if ok:
            return name
    return "cpu"
