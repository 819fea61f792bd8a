"""probes/ holds the registered probes only; the instruments they use live in instruments/."""

from __future__ import annotations

import pkgutil

import pytest

import torchport.instruments
import torchport.probes
from torchport import plugins
from torchport.probes.registry import UnknownProbe, probe_names

# The modules of probes/ that are not probes: the base class and the lookup.
PROBE_SUPPORT = {"base", "registry"}


def _modules(package) -> set[str]:
    return {m.name for m in pkgutil.iter_modules(package.__path__)}


def test_every_module_in_probes_is_a_registered_probe():
    registered = {
        target.partition(":")[0].rpartition(".")[2]
        for target in plugins.targets("torchport.probes").values()
        if target.startswith("torchport.probes.")
    }
    assert _modules(torchport.probes) - PROBE_SUPPORT == registered


def test_no_instrument_is_registered_as_a_probe():
    targets = plugins.targets("torchport.probes").values()
    assert not [t for t in targets if t.startswith("torchport.instruments.")]
    assert "parity" in _modules(torchport.instruments)
    assert "parity" not in probe_names()


def test_unknown_probe_names_the_known_ones():
    from torchport.probes.registry import load_probe

    with pytest.raises(UnknownProbe, match="known: .*placement"):
        load_probe("no_such_probe")
