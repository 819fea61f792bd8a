"""Probes are found through the ``torchport.probes`` entry-point group."""

from __future__ import annotations

from torchport import plugins


class UnknownProbe(LookupError):
    pass


def _targets() -> dict[str, str]:
    return plugins.targets("torchport.probes")


def probe_names() -> list[str]:
    return sorted(_targets())


def load_probe(name: str):
    target = _targets().get(name)
    if target is None:
        raise UnknownProbe(f"unknown probe '{name}'; known: {', '.join(probe_names())}")
    return plugins.load(target)()
