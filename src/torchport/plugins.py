"""Entry-point lookup shared by every registry (suites, devices, probes).

Built-ins and outside packages register the same way: ``name = "pkg.module:attr"`` under a
``torchport.<kind>`` group. Targets are read once per process; objects are imported on demand.
"""

from __future__ import annotations

import functools
from importlib import import_module


@functools.cache
def targets(group: str) -> dict[str, str]:
    """name -> "module:attr" for one entry-point group (scanning installed packages is slow).
    importlib.metadata is imported here, on the first lookup: a command that reads the
    knowledge base alone (compare, export, gate) never pays its 25 ms import."""
    from importlib import metadata

    return {ep.name: ep.value for ep in metadata.entry_points(group=group)}


def load(target: str):
    """Import ``"pkg.module:attr.sub"`` and return the attribute."""
    module, _, attr = target.partition(":")
    obj = import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
