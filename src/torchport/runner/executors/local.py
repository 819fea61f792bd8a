"""The local executor: one worker process at a time on this host, tasks in order.

A worker (``runner.executors.worker``) is a supervised child: it stays up across tasks (imports and
the reference cache are paid once), and is replaced when it dies or a deadline kills it. A task that
asks for a cold worker gets a fresh one whose compile caches start empty, thrown away after it.
Failures are classified from exit codes, signals and the worker's own events, never from words in
error text.
"""

from __future__ import annotations

import collections
import json
import shutil
import tempfile
from collections.abc import Callable

from torchport import settings
from torchport.config import COLD_WORKER_ENV
from torchport.execution.child import BadEvent, Child, LogFolder
from torchport.records.result import crashed, error_note
from torchport.runner.executors.protocol import (
    Deadline,
    ExecutorBroken,
    Finished,
    finished_crash,
    finished_skip,
)
from torchport.runner.plan import Task
from torchport.timing import clock

READY_TIMEOUT_S = 300.0
# A worker imports torch and the backend before it is ready: however short --timeout is, it
# gets this long to start (a loaded 2-core machine takes ~7 s for the CPU build).
MIN_START_S = 60.0


def start_deadline_s(case_s: float) -> float:
    """How long a worker may take to be ready: within --timeout (at least MIN_START_S), and
    never past READY_TIMEOUT_S. A worker stopped while starting is killed by then."""
    return min(READY_TIMEOUT_S, max(case_s, MIN_START_S))


MAX_START_FAILURES = 2
# The worker's own watchdog ends it this long after the supervisor's deadline would have.
WATCHDOG_MARGIN_S = 30.0


class WorkerStartError(RuntimeError):
    pass


# A worker is replaced before its next task once it holds more than these (it stays up across
# tasks otherwise): memory maps past a quarter of the kernel's limit (torch_xla's cached
# executables hold maps until a long-lived worker reaches vm.max_map_count, 65 530, and aborts
# in a case that passes alone), or a resident set past half the host's memory.
MAPS_ENV = "TORCHPORT_WORKER_MAX_MAPS"
RSS_ENV = "TORCHPORT_WORKER_MAX_RSS_BYTES"


def _max_map_count() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65530  # Linux's default


def watermarks() -> dict[str, int]:
    import psutil

    maps = settings.value(MAPS_ENV)
    rss = settings.value(RSS_ENV)
    return {
        "maps": maps if maps is not None else _max_map_count() // 4,
        "rss_bytes": rss if rss is not None else psutil.virtual_memory().total // 2,
    }


def over_watermark(resources: dict, limits: dict[str, int] | None = None) -> str | None:
    """Why a worker holding ``resources`` (its own report after a task) is replaced, or None."""
    limits = limits or watermarks()
    for what, unit in (("maps", "memory maps"), ("rss_bytes", "bytes resident")):
        held = resources.get(what)
        if isinstance(held, int) and held >= limits[what]:
            return (
                f"the worker held {held:,} {unit} after this task (watermark {limits[what]:,}): "
                "replaced by a fresh one before the next task"
            )
    return None


class WorkerProcess:
    """One ``python -m torchport.runner.executors.worker`` process."""

    def __init__(
        self, device: str, env: dict[str, str], logs: LogFolder, cold_root: str | None = None
    ):
        self.logs, self.cold_root = logs, cold_root
        self.child = Child(
            "torchport.runner.executors.worker",
            ["--device", device],
            env=env,
            log_dir=logs.path,
            name="worker",
        )
        self.environment: dict | None = None
        self.task: Task | None = None  # the task now running, and its watch
        self.deadline = Deadline(case_s=0.0)
        self.stage: str | None = None
        self.started = self.case_deadline = 0.0
        self.compile_deadline: float | None = None
        self.config_sent: dict | None = None  # the run's config, sent once before any task
        self.recycle_reason: str | None = None  # past a watermark: no further task

    @property
    def reusable(self) -> bool:
        """Alive and within its watermarks (``over_watermark``): it may take another task."""
        return self.alive and self.recycle_reason is None

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> dict:
        """Wait for the worker's ready event (at most ``timeout_s``); its environment
        fingerprint."""
        try:
            event = self.child.next_event(clock() + timeout_s)
        except BadEvent as exc:
            event = {"event": "fatal", "error": {"message": str(exc)}}
        if event is None and self.child.alive:
            self.child.kill()
            self.logs.keep(self.child.log.name)
            raise WorkerStartError(
                f"the worker was not ready within its {timeout_s:g} s start-up deadline; "
                "torchport killed it"
            )
        return self.on_ready(event)

    def on_ready(self, event: dict | None) -> dict:
        """The first event (None: none came in time, or the stream ended): the environment,
        else WorkerStartError with the reason."""
        if event is None or event.get("event") != "ready":
            detail = (event or {}).get("error", {}).get("message") if event else None
            self.child.kill()
            self.logs.keep(self.child.log.name)
            raise WorkerStartError(
                detail
                or f"worker exited ({self.child.exit_description()})"
                f" before it was ready: {self.child.tail()[-800:]}"
            )
        self.environment = event["environment"]
        return self.environment

    @property
    def alive(self) -> bool:
        return self.child.alive

    def execute(self, task: Task, config: dict, deadline: Deadline) -> dict | None:
        """Send one task; return its result, or a timeout/crash result built here."""
        lost = self.begin(task, config, deadline)
        if lost is not None:
            return lost
        while True:
            try:
                event = self.child.next_event(self.wake_at())
            except BadEvent as exc:
                return self.on_bad_event(exc)
            if event is None:
                if self.child.alive and clock() >= self.wake_at():
                    return self.on_late()
                return self.on_end()
            finished, result = self.on_event(event)
            if finished:
                return result

    # One task in steps, so that a supervisor can watch many workers at once
    # (runner.executors.parallel): begin, then on_event for each event until one returns the result;
    # on_late once wake_at() passes; on_end when the event stream ends; on_bad_event for a line that
    # is not an event.
    def begin(self, task: Task, config: dict, deadline: Deadline) -> dict | None:
        """Send ``task`` (``config``: the run's, sent on its own line when the worker does not
        hold it yet; ``deadline``: the run's); None, or a crash result if the worker no longer
        reads. The task carries case, mode, its deadline and only the fields of the run's
        config it changes (``Task.changes``)."""
        deadline = deadline.of(task)
        self.task, self.deadline, self.stage = task, deadline, None
        self.started = clock()
        self.case_deadline, self.compile_deadline = self.started + deadline.case_s, None
        if config != self.config_sent:
            if not self.child.send(json.dumps({"config": config})):
                return self._crashed(task, None)
            self.config_sent = config
        message = {
            "case": task.case,
            "mode": task.mode,
            "watchdog_s": deadline.case_s + WATCHDOG_MARGIN_S,
        }
        if task.changes:
            message["changes"] = task.changes
        if not self.child.send(json.dumps(message)):
            return self._crashed(task, None)
        return None

    def wake_at(self) -> float:
        """The clock time at which the running task is late (case or compile deadline)."""
        if self.compile_deadline is None:
            return self.case_deadline
        return min(self.case_deadline, self.compile_deadline)

    def on_event(self, event: dict) -> tuple[bool, dict | None]:
        """(finished, result): finished once the result event came (its result may be
        missing or malformed: the api records that as a crash)."""
        if event["event"] == "stage":
            self.stage = event.get("stage")
            self.compile_deadline = (
                clock() + self.deadline.compile_s
                if self.stage == "compile" and self.deadline.compile_s
                else None
            )
            return False, None
        if event["event"] != "result":
            return False, None
        result = event.get("result")
        if (
            not isinstance(result, dict)
            or (result.get("case"), result.get("mode")) != self._task().key
        ):
            # Something in the worker wrote a result that is not this task's: nothing more
            # it sends can be trusted. The api records the mismatch as a crash.
            self.child.kill()
        elif isinstance(event.get("resources"), dict):
            self._note_resources(result, event["resources"])
        return True, result

    def _note_resources(self, result: dict, resources: dict) -> None:
        self.recycle_reason = over_watermark(resources)
        findings = result.setdefault("findings", {})
        if isinstance(findings, dict):
            findings["worker_resources"] = resources
            if self.recycle_reason:
                findings["worker_recycled"] = self.recycle_reason

    def on_bad_event(self, exc: BadEvent) -> dict:
        self.child.kill()
        return self._lost(
            self._task(),
            self.stage,
            "crash",
            f"the worker wrote a malformed event ({exc}); it was killed",
        )

    def on_late(self) -> dict:
        """A deadline passed: kill the group, and say which limit it was."""
        now = clock()
        self.child.kill()
        compile_hit = self.compile_deadline is not None and now >= self.compile_deadline
        seconds = self.deadline.compile_s if compile_hit else self.deadline.case_s
        what = "compilation" if compile_hit else "the case"
        return self._lost(
            self._task(),
            self.stage,
            "compile_timeout" if compile_hit else "timeout",
            f"{what} ran past its {seconds:g} s limit; the worker was killed "
            "with its process group",
            elapsed_s=now - self.started,
        )

    def on_end(self) -> dict:
        """The event stream ended: let the worker report how it ended."""
        self.child.wait_exit(10)
        self.child.kill()
        return self._crashed(self._task(), self.stage)

    def _task(self) -> Task:
        assert self.task is not None, "no task is running"
        return self.task

    def _lost(
        self,
        task: Task,
        stage: str | None,
        status: str,
        message: str,
        elapsed_s: float | None = None,
    ) -> dict:
        log = self.logs.keep(self.child.log.name)
        result = crashed(
            task.case,
            task.mode,
            case_version=task.case_version,
            stage=stage or "worker",
            status=status,
            error={
                **error_note("Timeout" if "timeout" in status else "WorkerError", message),
                "traceback": self.child.tail(),
            },
        )
        result.findings = {"tags": list(task.tags), "worker_log": log}
        if elapsed_s is not None:
            result.durations["elapsed_s"] = elapsed_s
        return result.to_dict()

    def _crashed(self, task: Task, stage: str | None) -> dict:
        code = self.child.returncode
        out = self._lost(
            task,
            stage,
            "crash",
            f"worker died ({self.child.exit_description()}) during stage '{stage}'",
        )
        out["findings"]["exit_code"] = code
        return out

    def close(self) -> None:
        if self.child.alive:
            self.child.close_stdin()
            self.child.wait_exit(10)
        self.child.kill()  # the group, also what a finished worker left behind
        if self.cold_root:
            shutil.rmtree(self.cold_root, ignore_errors=True)


def warm_worker(
    current: WorkerProcess | None,
    device: str,
    env: dict[str, str],
    logs: LogFolder,
    start_s: float = READY_TIMEOUT_S,
) -> WorkerProcess:
    """``current`` while it lives within its watermarks; else a new worker, started
    (WorkerStartError if it cannot)."""
    if current is not None and current.reusable:
        return current
    if current is not None:
        current.close()
    worker = WorkerProcess(device, env, logs)
    worker.start(start_s)
    return worker


def cold_worker(
    device: str, env: dict[str, str], cache_dirs, logs: LogFolder, start_s: float = READY_TIMEOUT_S
) -> WorkerProcess:
    """A worker of its own whose compile caches start empty; it goes after its task."""
    root = tempfile.mkdtemp(prefix="torchport-cold-")
    worker = WorkerProcess(
        device, {**env, **cache_dirs(root), COLD_WORKER_ENV: root}, logs, cold_root=root
    )
    try:
        worker.start(start_s)
    except WorkerStartError:
        worker.close()
        raise
    return worker


class LocalExecutor:
    """Serial: ``next_result`` runs the next queued task to its end (or its deadline)."""

    def __init__(
        self,
        *,
        device: str,
        env: dict[str, str],
        config: dict,
        deadline: Deadline,
        cache_dirs: Callable[[str], dict[str, str]] | None = None,
    ):
        self.device, self.env, self.config, self.deadline = device, env, config, deadline
        self.cache_dirs = cache_dirs or (lambda root: {})
        self.queue: collections.deque[Task] = collections.deque()
        self.worker: WorkerProcess | None = None
        self.current: WorkerProcess | None = None
        self.start_failures = 0
        self.logs = LogFolder()

    def submit(self, task: Task) -> None:
        self.queue.append(task)

    def next_result(self, timeout_s: float | None = None) -> Finished | None:
        if not self.queue:
            return None
        task = self.queue.popleft()
        if task.skip_reason:
            return finished_skip(task)
        try:
            worker = self._cold_worker() if task.cold else self._warm_worker()
        except WorkerStartError as exc:
            self.start_failures += 1
            if self.start_failures >= MAX_START_FAILURES:
                raise ExecutorBroken(str(exc)) from None
            return finished_crash(task, "worker_start", "WorkerStartError", str(exc))
        self.start_failures = 0
        self.current = worker
        try:
            result = worker.execute(task, self.config, self.deadline)
        finally:
            self.current = None
            if task.cold:
                worker.close()
        return Finished(task=task, result=result, environment=worker.environment)

    def _warm_worker(self) -> WorkerProcess:
        start_s = start_deadline_s(self.deadline.case_s)
        self.worker = warm_worker(self.worker, self.device, self.env, self.logs, start_s)
        return self.worker

    def _cold_worker(self) -> WorkerProcess:
        start_s = start_deadline_s(self.deadline.case_s)
        return cold_worker(self.device, self.env, self.cache_dirs, self.logs, start_s)

    def cancel(self) -> None:
        self.queue.clear()
        for worker in (self.current, self.worker):
            if worker is not None:
                worker.child.kill()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        self.logs.close()
