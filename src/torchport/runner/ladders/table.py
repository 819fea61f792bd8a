"""Which ladder runs a task, chosen through one table instead of a chain of ifs.

A case names its ladder (``Case.ladder``: "op", "kernel", ...; none: the model ladder); a
scenario can claim every case of a run (``--scenario generate``). Each ladder is a
``runner.stages.StageRunner`` subclass, named here as ``"module:Class"`` so nothing is
imported before a task needs it.

To add a ladder: write it on ``StageRunner`` and add one line to ``LADDERS`` (and, when a
scenario rather than a case chooses it, one to ``SCENARIO_LADDERS``).
"""

from __future__ import annotations

from torchport import plugins
from torchport.config import RunConfig

LADDERS = {
    "model": "torchport.runner.ladders.model:Ladder",
    "op": "torchport.runner.ops.ladder:OpLadder",  # ops suite: a task per op, many samples
    "audit": "torchport.runner.ops.audit:AuditLadder",  # ops suite: the dispatcher's registry
    "schema": "torchport.runner.ops.schema:SchemaLadder",  # ops suite: schema-made samples
    "kernel": "torchport.runner.kernels.ladder:KernelLadder",  # a replacement's A/B
    "generate": "torchport.runner.ladders.generate:GenerateLadder",
    "dist": "torchport.runner.dist.ladder:DistLadder",  # dist suite: a world of N ranks
}
SCENARIO_LADDERS = {"generate": "generate"}


def ladder_name(case, config: RunConfig) -> str:
    """The scenario's ladder, else the case's own, else the model ladder."""
    return SCENARIO_LADDERS.get(config.scenario) or getattr(case, "ladder", None) or "model"


def ladder_class(name: str):
    target = LADDERS.get(name)
    if target is None:
        raise LookupError(f"unknown ladder '{name}'; known: {', '.join(sorted(LADDERS))}")
    return plugins.load(target)


def preload() -> None:
    """Import every ladder (a worker does it before it says it is ready, so that a task's
    deadline does not pay for the imports)."""
    for name in LADDERS:
        ladder_class(name)
