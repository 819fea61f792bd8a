"""Executors: where a run's tasks execute. The api drives one through this protocol only.

To add one (parallel workers, Ray): implement ``Executor``; every result it returns is a
``Result`` dict for the task it names, and every wait it does has a deadline. A task whose
worker dies, hangs or cannot start still yields a result (crash, timeout), never a raise;
``ExecutorBroken`` is raised only when the executor cannot go on at all.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from torchport.runner.plan import Task
from torchport.timing import clock


@dataclass(frozen=True, kw_only=True)
class Deadline:
    case_s: float
    compile_s: float | None = None

    def of(self, task: Task) -> Deadline:
        """The run's deadlines, or those the task's own config changes (``Task.changes``)."""
        case_s = task.changes.get("timeout_s", self.case_s)
        compile_s = task.changes.get("compile_timeout_s", self.compile_s)
        return Deadline(case_s=case_s, compile_s=compile_s)


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


class SlotLoop:
    """The dispatch loop the local-parallel and Ray executors share: queued tasks go to free
    slots (a task the plan skips is answered at once, without a worker), then the busy slots
    are waited on, never past ``timeout_s``, until one task finishes.

    A subclass sets ``slots`` (each with a ``task``), says how a slot takes a task
    (``_assign``), which slots are waited on (``_busy``) and how (``_wait``, which appends
    to ``done``), and sets ``broken`` when it cannot go on.
    """

    slots: list[Any]

    def __init__(self) -> None:
        self.queue: collections.deque[Task] = collections.deque()
        self.done: collections.deque[Finished] = collections.deque()
        self.broken: str | None = None

    def submit(self, task: Task) -> None:
        self.queue.append(task)

    def next_result(self, timeout_s: float | None = None) -> Finished | None:
        end = None if timeout_s is None else clock() + timeout_s
        while not self.done:
            if self.broken:
                raise ExecutorBroken(self.broken)
            self._dispatch()
            if self.done:
                break
            busy = [slot for slot in self.slots if self._busy(slot)]
            if not busy:
                return None  # nothing queued, nothing running
            self._wait(busy, end)
            if not self.done and end is not None and clock() >= end:
                return None
        return self.done.popleft()

    def _dispatch(self) -> None:
        for slot in self.slots:
            while slot.task is None and self.queue and not self.broken:
                task = self.queue.popleft()
                if task.skip_reason:
                    self.done.append(finished_skip(task))
                    continue
                self._assign(slot, task)

    def _busy(self, slot) -> bool:
        return slot.task is not None

    def _assign(self, slot, task: Task) -> None:
        raise NotImplementedError

    def _wait(self, busy: list, end: float | None) -> None:
        raise NotImplementedError


def wait_s(wake_ats: Iterable[float], end: float | None, cap_s: float) -> float:
    """How long one wait may block: until the first slot's deadline or ``end``, at most
    ``cap_s`` (a bound on how late a signal or a stuck clock is noticed)."""
    wake = min(wake_ats)
    if end is not None:
        wake = min(wake, end)
    return min(max(0.0, wake - clock()), cap_s)
