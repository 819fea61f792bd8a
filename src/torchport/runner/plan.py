"""The plan of a run: which (case, mode) tasks, and how each one must be executed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from torchport.cases.registry import load_suite, select
from torchport.config import ConfigError, RunConfig
from torchport.execution import child


@dataclass(frozen=True, kw_only=True)
class Task:
    """One (case, mode) of a run. ``cold``: run it in a fresh worker whose compile caches start
    empty, so its first compiled step is a cold compile (``Probe.cold_worker``). ``changes``:
    the fields of the run's config this task runs with instead (``Case.run_options``, e.g. a
    longer ``timeout_s``), only those that differ: a worker holds the run's config once and
    rebuilds each task's from it (``RunConfig.with_changes``)."""

    case: str
    mode: str
    case_version: int = 1
    tags: tuple[str, ...] = ()
    skip_reason: str | None = None
    cold: bool = False
    changes: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.case, self.mode)


def cold_worker_modes(config: RunConfig) -> tuple[str, ...]:
    """Modes whose tasks each get a fresh worker with empty compile caches: compile, when a
    requested probe asks for it (``Probe.cold_worker``)."""
    from torchport.probes.registry import load_probe

    wanted = "compile" in config.modes and any(
        load_probe(name).cold_worker for name in config.probes
    )
    return ("compile",) if wanted else ()


def expand(config: RunConfig) -> list[Task]:
    cases = select(load_suite(config.suite, workload=config.workload), config.cases, config.exclude)
    cold = cold_worker_modes(config)
    changes = {c.id: _changes(config, c) for c in cases}
    tasks = [
        Task(
            case=c.id,
            mode=mode,
            case_version=c.version,
            tags=tuple(c.tags),
            skip_reason=c.skip_reason,
            cold=mode in cold,
            changes=changes[c.id],
        )
        for c in cases
        for mode in config.modes
        if c.modes is None or mode in c.modes
    ]
    if not tasks:  # every chosen case runs only in modes the run did not ask for
        can = sorted({m for c in cases for m in (c.modes or ())})
        raise ConfigError(
            f"the chosen cases run in mode {', '.join(can)} only, not "
            f"{', '.join(config.modes)}; pass --modes {','.join(can)}"
        )
    return tasks


def _changes(config: RunConfig, case) -> dict[str, Any]:
    options = getattr(case, "run_options", None)
    return config.changes(options, who=f"case {case.id}") if options else {}


def worker_env(config: RunConfig, adapter, workload_path: str | None = None) -> dict[str, str]:
    """Worker environment: fallback made visible per op; strict switches when asked.

    Only the folder holding the user's workload module is added to the module path, and after
    the standard library (PYTHONPATH entries come before it, so the folder is not put there:
    ``TORCHPORT_WORKLOAD_PATH`` is appended to sys.path by the worker).
    """
    env = dict(os.environ)
    env.update(adapter.debug_env)
    if config.strict:
        for key in adapter.strict_unset:
            env.pop(key, None)
        env.update(adapter.strict_env)
    if workload_path:
        env[WORKLOAD_PATH_ENV] = workload_path
    env["PYTHONUNBUFFERED"] = "1"
    return env


WORKLOAD_PATH_ENV = child.WORKLOAD_PATH_ENV  # read by the one bootstrap of every child
