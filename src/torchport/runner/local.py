"""The local executor: one worker process at a time on this host, tasks in order.

A worker (``runner.worker``) is a supervised child: it stays up across tasks (imports and the
reference cache are paid once), and is replaced when it dies or a deadline kills it. A task that
asks for a cold worker gets a fresh one whose compile caches start empty, thrown away after it.
Failures are classified from exit codes, signals and the worker's own events, never from words
in error text.
"""

from __future__ import annotations

import collections
import json
import shutil
import tempfile

from torchport.config import COLD_WORKER_ENV
from torchport.execution.child import BadEvent, Child, LogFolder
from torchport.records.result import crashed, error_note, skipped
from torchport.runner.executor import Deadline, ExecutorBroken, Finished
from torchport.runner.plan import Task
from torchport.timing import clock

READY_TIMEOUT_S = 300.0
MAX_START_FAILURES = 2
# The worker's own watchdog ends it this long after the supervisor's deadline would have.
WATCHDOG_MARGIN_S = 30.0


class WorkerStartError(RuntimeError):
    pass


class WorkerProcess:
    """One ``python -m torchport.runner.worker`` process."""

    def __init__(self, device: str, env: dict[str, str], logs: LogFolder,
                 cold_root: str | None = None):
        self.logs, self.cold_root = logs, cold_root
        self.child = Child("torchport.runner.worker", ["--device", device], env=env,
                           log_dir=logs.path, name="worker")
        self.environment: dict | None = None

    def start(self) -> dict:
        try:
            event = self.child.next_event(clock() + READY_TIMEOUT_S)
        except BadEvent as exc:
            event = {"event": "fatal", "error": {"message": str(exc)}}
        if event is None or event.get("event") != "ready":
            detail = (event or {}).get("error", {}).get("message") if event else None
            self.child.kill()
            self.logs.keep(self.child.log.name)
            raise WorkerStartError(detail or f"worker exited ({self.child.exit_description()})"
                                   f" before it was ready: {self.child.tail()[-800:]}")
        self.environment = event["environment"]
        return self.environment

    @property
    def alive(self) -> bool:
        return self.child.alive

    def execute(self, task: Task, config: dict, deadline: Deadline) -> dict:
        """Send one task; return its result, or a timeout/crash result built here."""
        message = {"case": task.case, "mode": task.mode, "config": config,
                   "watchdog_s": deadline.case_s + WATCHDOG_MARGIN_S}
        if not self.child.send(json.dumps(message)):
            return self._crashed(task, None)
        started = clock()
        case_deadline = started + deadline.case_s
        stage, compile_deadline = None, None
        while True:
            limit = case_deadline if compile_deadline is None else min(case_deadline,
                                                                         compile_deadline)
            try:
                event = self.child.next_event(limit)
            except BadEvent as exc:
                self.child.kill()
                return self._lost(task, stage, "crash", f"the worker wrote a malformed event "
                                  f"({exc}); it was killed")
            if event is None:
                now = clock()
                if self.child.alive and now >= limit:  # a deadline passed: kill the group
                    self.child.kill()
                    compile_hit = compile_deadline is not None and now >= compile_deadline
                    seconds = deadline.compile_s if compile_hit else deadline.case_s
                    what = "compilation" if compile_hit else "the case"
                    return self._lost(task, stage, "compile_timeout" if compile_hit else
                                      "timeout", f"{what} ran past its {seconds:g} s limit; "
                                      "the worker was killed with its process group",
                                      elapsed_s=now - started)
                self.child.wait_exit(10)  # end of stream: let it report how it ended
                self.child.kill()
                return self._crashed(task, stage)
            if event["event"] == "stage":
                stage = event.get("stage")
                compile_deadline = (clock() + deadline.compile_s
                                    if stage == "compile" and deadline.compile_s else None)
            elif event["event"] == "result":
                result = event.get("result")
                if not isinstance(result, dict) or (result.get("case"), result.get("mode")) \
                        != task.key:
                    # Something in the worker wrote a result that is not this task's: nothing
                    # more it sends can be trusted. The api records the mismatch as a crash.
                    self.child.kill()
                return result

    def _lost(self, task: Task, stage: str | None, status: str, message: str,
              elapsed_s: float | None = None) -> dict:
        log = self.logs.keep(self.child.log.name)
        result = crashed(task.case, task.mode, case_version=task.case_version, stage=stage or
                         "worker", status=status, error={**error_note(
                             "Timeout" if "timeout" in status else "WorkerError", message),
                             "traceback": self.child.tail()})
        result.findings = {"tags": list(task.tags), "worker_log": log}
        if elapsed_s is not None:
            result.durations["elapsed_s"] = elapsed_s
        return result.to_dict()

    def _crashed(self, task: Task, stage: str | None) -> dict:
        code = self.child.returncode
        out = self._lost(task, stage, "crash", f"worker died ({self.child.exit_description()})"
                         f" during stage '{stage}'")
        out["findings"]["exit_code"] = code
        return out

    def close(self) -> None:
        if self.child.alive:
            self.child.close_stdin()
            self.child.wait_exit(10)
        self.child.kill()  # the group, also what a finished worker left behind
        if self.cold_root:
            shutil.rmtree(self.cold_root, ignore_errors=True)


class LocalExecutor:
    """Serial: ``next_result`` runs the next queued task to its end (or its deadline)."""

    def __init__(self, *, device: str, env: dict[str, str], config: dict, deadline: Deadline,
                 cache_dirs=None):
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
            return Finished(task=task, result=skipped(
                task.case, task.mode, case_version=task.case_version, reason=task.skip_reason,
                tags=task.tags).to_dict())
        try:
            worker = self._cold_worker() if task.cold else self._warm_worker()
        except WorkerStartError as exc:
            self.start_failures += 1
            if self.start_failures >= MAX_START_FAILURES:
                raise ExecutorBroken(str(exc)) from None
            return Finished(task=task, result=crashed(
                task.case, task.mode, case_version=task.case_version, stage="worker_start",
                error=error_note("WorkerStartError", str(exc))).to_dict())
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
        if self.worker is None or not self.worker.alive:
            if self.worker is not None:
                self.worker.close()
            self.worker = None
            worker = WorkerProcess(self.device, self.env, self.logs)
            worker.start()
            self.worker = worker
        return self.worker

    def _cold_worker(self) -> WorkerProcess:
        """A worker of its own whose compile caches start empty; it goes after its task."""
        root = tempfile.mkdtemp(prefix="torchport-cold-")
        env = {**self.env, **self.cache_dirs(root), COLD_WORKER_ENV: root}
        worker = WorkerProcess(self.device, env, self.logs, cold_root=root)
        try:
            worker.start()
        except WorkerStartError:
            worker.close()
            raise
        return worker

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
