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


# What a plain ``torchport run`` measures besides the ladder: placement where the device is not
# the host (the point of evaluating a backend) and a short perf pass. Compile economics (cold and
# warm compiles in fresh processes) costs minutes per sweep on a small host, so it runs when asked
# for: ``--probes compile``, or ``--shapes`` (the recompile study is part of it). ``flex``
# applies to FlexAttention cases only (block-mask build time, SDPA parity).
DEFAULT_PROBES = ("placement", "perf", "flex")


def default_probes(device: str) -> tuple[str, ...]:
    known = set(probe_names())
    chosen = [p for p in DEFAULT_PROBES if p in known]
    if device.split(":")[0] == "cpu" and "placement" in chosen:
        chosen.remove("placement")
    return tuple(chosen)
