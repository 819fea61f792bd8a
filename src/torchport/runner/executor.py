"""Executors: where a run's tasks execute. The api drives one through this protocol only.

To add one (parallel workers, Ray): implement ``Executor``; every result it returns is a
``Result`` dict for the task it names, and every wait it does has a deadline. A task whose
worker dies, hangs or cannot start still yields a result (crash, timeout), never a raise;
``ExecutorBroken`` is raised only when the executor cannot go on at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from torchport.runner.plan import Task


@dataclass(frozen=True, kw_only=True)
class Deadline:
    case_s: float
    compile_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class Finished:
    """One task's outcome. ``environment``: the fingerprint of the worker that ran it."""

    task: Task
    result: dict | None  # None or malformed: the api records a crash @record
    environment: dict | None = None


class ExecutorBroken(RuntimeError):
    """The executor cannot run any more tasks (e.g. workers fail to start again and again)."""


class Executor(Protocol):
    def submit(self, task: Task) -> None:
        """Queue one task."""

    def next_result(self, timeout_s: float | None = None) -> Finished | None:
        """The next finished task; None when nothing is queued, or when ``timeout_s`` passes."""

    def cancel(self) -> None:
        """Stop everything now: kill running tasks' processes, drop the queue."""

    def close(self) -> None:
        """Release workers after the last result (cleanly where possible)."""


def finished_skip(task: Task) -> Finished:
    """A task the plan already skips (its reason held as data): answered without a worker."""
    from torchport.records.result import skipped

    assert task.skip_reason is not None
    result = skipped(
        task.case,
        task.mode,
        case_version=task.case_version,
        reason=task.skip_reason,
        tags=task.tags,
    )
    return Finished(task=task, result=result.to_dict())


def finished_crash(task: Task, stage: str, kind: str, message: str) -> Finished:
    """A task whose worker could not run it (it did not start, its node was lost)."""
    from torchport.records.result import crashed, error_note

    result = crashed(
        task.case,
        task.mode,
        case_version=task.case_version,
        stage=stage,
        error=error_note(kind, message),
    )
    return Finished(task=task, result=result.to_dict())
