"""The parallel local executor (``--jobs N``): N supervised workers on this host at once.

Each slot owns one warm worker (``runner.executors.local.WorkerProcess``) with its share of the host
(``runner.executors.shares``: its own device index, or an equal share of the cores). The supervisor
waits on every worker's event channel at once (one ``select`` over their fds), each worker with its
own deadlines, so a hung or dying worker never holds up the others' results. Results are returned in
the order they finish. A cold-compile task gets a fresh worker of its own, as in the serial
executor. Starting a worker is waited on the same way: a slow start does not block the others.
"""

from __future__ import annotations

import select
import tempfile
from collections.abc import Callable

from torchport.config import COLD_WORKER_ENV
from torchport.execution.child import BadEvent, LogFolder
from torchport.runner.executors.local import (
    MAX_START_FAILURES,
    WorkerProcess,
    WorkerStartError,
    start_deadline_s,
)
from torchport.runner.executors.protocol import (
    Deadline,
    Finished,
    SlotLoop,
    finished_crash,
    wait_s,
)
from torchport.runner.executors.shares import Share
from torchport.runner.plan import Task
from torchport.timing import clock

# A cap on one select: only a bound on how late a deadline can be noticed would need it, since
# every deadline is in the timeout; it also keeps a stuck clock from blocking forever.
MAX_WAIT_S = 5.0


class _Slot:
    """One worker place: its share, its warm worker, and the task it is running."""

    def __init__(self, share: Share, device: str):
        self.share, self.device = share, device
        self.warm: WorkerProcess | None = None
        self.worker: WorkerProcess | None = None  # running (or starting for) ``task``
        self.task: Task | None = None
        self.ready_by: float | None = None  # set while ``worker`` is starting

    def wake_at(self) -> float:
        assert self.worker is not None
        return self.ready_by if self.ready_by is not None else self.worker.wake_at()


class ParallelExecutor(SlotLoop):
    def __init__(
        self,
        *,
        shares: list[Share],
        devices: list[str],
        env: dict[str, str],
        config: dict,
        deadline: Deadline,
        cache_dirs=None,
        ready_timeout_s: float | None = None,
    ):
        self.env, self.config, self.deadline = env, config, deadline
        self.cache_dirs: Callable[[str], dict[str, str]] = cache_dirs or (lambda root: {})
        # None: the start-up deadline within --timeout (local.start_deadline_s)
        self.ready_timeout_s = (
            start_deadline_s(deadline.case_s) if ready_timeout_s is None else ready_timeout_s
        )
        super().__init__()
        self.slots = [_Slot(share, device) for share, device in zip(shares, devices, strict=True)]
        self.start_failures = 0
        self.logs = LogFolder()

    # -- handing out tasks (SlotLoop._dispatch calls _assign) ---------------------------
    def _assign(self, slot: _Slot, task: Task) -> None:
        slot.task = task
        if task.cold:
            root = tempfile.mkdtemp(prefix="torchport-cold-")
            env = {**self._slot_env(slot), **self.cache_dirs(root), COLD_WORKER_ENV: root}
            slot.worker = WorkerProcess(slot.device, env, self.logs, cold_root=root)
        elif slot.warm is not None and slot.warm.reusable:
            slot.worker = slot.warm
            self._begin(slot)
            return
        else:
            if slot.warm is not None:
                slot.warm.close()
            slot.warm = slot.worker = WorkerProcess(slot.device, self._slot_env(slot), self.logs)
        slot.ready_by = clock() + self.ready_timeout_s  # its ready event is waited on below

    def _slot_env(self, slot: _Slot) -> dict[str, str]:
        return {**self.env, **slot.share.env}

    def _begin(self, slot: _Slot) -> None:
        assert slot.worker is not None and slot.task is not None
        lost = slot.worker.begin(slot.task, self.config, self.deadline)
        if lost is not None:
            self._finish(slot, lost)

    # -- waiting on every worker at once -------------------------------------------------
    def _wait(self, busy: list[_Slot], end: float | None) -> None:
        for slot in busy:  # events read earlier but not yet handled
            self._drain(slot)
        busy = [slot for slot in busy if slot.task is not None]
        if not busy or self.done:
            return
        by_fd: dict[int, _Slot] = {}
        for slot in busy:
            fd = slot.worker.child.fileno() if slot.worker is not None else None
            if fd is not None:
                by_fd[fd] = slot
        timeout = wait_s((slot.wake_at() for slot in busy), end, MAX_WAIT_S)
        readable, _, _ = select.select(list(by_fd), [], [], timeout)
        for fd in readable:
            slot = by_fd[fd]
            assert slot.worker is not None
            open_ = slot.worker.child.read_available()
            self._drain(slot)
            if not open_ and slot.task is not None:
                self._ended(slot)
        now = clock()
        for slot in busy:
            if slot.task is not None and now >= slot.wake_at():
                self._late(slot)

    def _drain(self, slot: _Slot) -> None:
        """Handle the events already read from ``slot``'s worker, until its task ends."""
        while slot.task is not None and slot.worker is not None:
            try:
                event = slot.worker.child.buffered_event()
            except BadEvent as exc:
                if slot.ready_by is not None:
                    self._start_failed(slot, WorkerStartError(str(exc)))
                else:
                    self._finish(slot, slot.worker.on_bad_event(exc))
                return
            if event is None:
                return
            if slot.ready_by is not None:
                self._ready(slot, event)
            else:
                finished, result = slot.worker.on_event(event)
                if finished:
                    self._finish(slot, result)

    def _ready(self, slot: _Slot, event: dict | None) -> None:
        assert slot.worker is not None
        try:
            slot.worker.on_ready(event)
        except WorkerStartError as exc:
            self._start_failed(slot, exc)
            return
        slot.ready_by = None
        self.start_failures = 0
        self._begin(slot)

    def _ended(self, slot: _Slot) -> None:
        assert slot.worker is not None
        if slot.ready_by is not None:
            self._ready(slot, None)
        else:
            self._finish(slot, slot.worker.on_end())

    def _late(self, slot: _Slot) -> None:
        assert slot.worker is not None
        if slot.ready_by is not None:
            slot.worker.child.kill()
            slot.worker.logs.keep(slot.worker.child.log.name)
            self._start_failed(
                slot,
                WorkerStartError(
                    f"the worker was not ready within its {self.ready_timeout_s:g} s start-up "
                    "deadline; torchport killed it"
                ),
            )
        else:
            self._finish(slot, slot.worker.on_late())

    # -- outcomes ------------------------------------------------------------------------
    def _start_failed(self, slot: _Slot, exc: WorkerStartError) -> None:
        task, worker = slot.task, slot.worker
        assert task is not None and worker is not None
        worker.child.kill()
        worker.logs.keep(worker.child.log.name)
        worker.close()
        if worker is slot.warm:
            slot.warm = None
        slot.task, slot.worker, slot.ready_by = None, None, None
        self.start_failures += 1
        if self.start_failures >= MAX_START_FAILURES:
            self.broken = str(exc)
        self.done.append(finished_crash(task, "worker_start", "WorkerStartError", str(exc)))

    def _finish(self, slot: _Slot, result: dict | None) -> None:
        task, worker = slot.task, slot.worker
        assert task is not None and worker is not None
        if isinstance(result, dict):  # a malformed one is the api's to record as such
            findings = result.setdefault("findings", {})
            if isinstance(findings, dict):
                findings["worker_share"] = slot.share.describe()
        self.done.append(Finished(task=task, result=result, environment=worker.environment))
        if worker is not slot.warm:
            worker.close()  # a cold worker serves one task
        slot.task, slot.worker = None, None

    def cancel(self) -> None:
        self.queue.clear()
        for slot in self.slots:
            for worker in (slot.worker, slot.warm):
                if worker is not None:
                    worker.child.kill()
            if slot.worker is not None and slot.worker is not slot.warm:
                slot.worker.close()  # removes a cold worker's cache folder
            slot.task = slot.worker = None

    def close(self) -> None:
        warm = [slot.warm for slot in self.slots if slot.warm is not None]
        for worker in warm:  # ask all to end first, then wait: they end side by side
            worker.child.close_stdin()
        for worker in warm:
            worker.close()
        for slot in self.slots:
            slot.warm = None
        self.logs.close()
