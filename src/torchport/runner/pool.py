"""Supervisor side of a worker: start, send one task, enforce deadlines, classify deaths.

Failures are classified from exit codes, signals and the worker's own events, never from
words in error text. A worker that hangs is killed with its whole process group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from torchport.runner.channel import LineReader
from torchport.timing import clock

READY_TIMEOUT_S = 300.0
TAIL_CHARS = 4000


class WorkerStartError(RuntimeError):
    pass


@dataclass
class Deadline:
    case_s: float
    compile_s: float | None = None


class Worker:
    def __init__(self, device: str, env: dict[str, str], log_dir: str):
        self.device, self.env, self.log_dir = device, env, log_dir
        self.proc: subprocess.Popen | None = None
        self.reader: LineReader | None = None
        self.environment: dict | None = None

    # -- life cycle -------------------------------------------------------------------
    def start(self) -> dict:
        read_fd, write_fd = os.pipe()
        self.log_file = tempfile.NamedTemporaryFile(
            "w+b", dir=self.log_dir, prefix="worker-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torchport.runner.worker", "--fd", str(write_fd),
             "--device", self.device],
            stdin=subprocess.PIPE, stdout=self.log_file, stderr=subprocess.STDOUT,
            pass_fds=(write_fd,), env=self.env, start_new_session=True)
        os.close(write_fd)
        self.reader = LineReader(read_fd)
        event = self._next_event(clock() + READY_TIMEOUT_S)
        if event is None or event.get("event") != "ready":
            detail = (event or {}).get("error", {}).get("message") if event else None
            code = self.kill()
            raise WorkerStartError(detail or f"worker exited ({describe_exit(code)}) before "
                                   f"it was ready: {self.tail()[-800:]}")
        self.environment = event["environment"]
        return self.environment

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        code = self.proc.wait()
        if self.reader is not None:
            self.reader.close()
        return code

    def close(self) -> None:
        if self.alive:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        self.proc = None

    def tail(self) -> str:
        self.log_file.flush()
        with open(self.log_file.name, "rb") as f:
            return log_tail(f, TAIL_CHARS)

    # -- one task -----------------------------------------------------------------------
    def execute(self, task: dict, deadline: Deadline) -> dict:
        """Send one task; return its result, or a timeout/crash result built here."""
        self.proc.stdin.write((json.dumps(task) + "\n").encode())
        self.proc.stdin.flush()
        started = clock()
        case_deadline = started + deadline.case_s
        stage, compile_deadline = None, None
        while True:
            limit = case_deadline if compile_deadline is None else min(case_deadline,
                                                                         compile_deadline)
            event = self._next_event(limit)
            if event is None:
                now = clock()
                if self.alive and now >= limit:  # a deadline passed: kill the whole group
                    self.kill()
                    self.proc = None
                    compile_hit = compile_deadline is not None and now >= compile_deadline
                    return self._lost(task, stage, "compile_timeout" if compile_hit else
                                      "timeout", started, deadline, compile_hit)
                try:  # end of stream: the worker is dying on its own; let it report how
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                code = self.kill()
                self.proc = None
                return self._crashed(task, stage, code)
            if event["event"] == "stage":
                stage = event["stage"]
                compile_deadline = (clock() + deadline.compile_s
                                    if stage == "compile" and deadline.compile_s else None)
            elif event["event"] == "result":
                return event["result"]

    def _lost(self, task, stage, status, started, deadline, compile_hit) -> dict:
        limit = deadline.compile_s if compile_hit else deadline.case_s
        what = "compilation" if compile_hit else "the case"
        return {"case": task["case"], "mode": task["mode"], "status": status, "stage": stage,
                "durations": {"elapsed_s": clock() - started},
                "error": {"type": "Timeout", "message": f"{what} ran past its {limit:g} s limit "
                          f"during stage '{stage}'; the worker was killed",
                          "traceback": self.tail()}}

    def _crashed(self, task, stage, code) -> dict:
        return {"case": task["case"], "mode": task["mode"], "status": "crash", "stage": stage,
                "findings": {"exit": describe_exit(code), "exit_code": code},
                "error": {"type": "WorkerCrash", "message": f"worker died ({describe_exit(code)})"
                          f" during stage '{stage}'", "traceback": self.tail()}}

    def _next_event(self, deadline: float) -> dict | None:
        """The next event, or None at EOF or when ``deadline`` passes."""
        line = self.reader.next_line(deadline)
        return None if line is None else json.loads(line)


def log_tail(log, chars: int) -> str:
    """The last ``chars`` bytes of a binary log file, decoded."""
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - chars))
    return log.read().decode(errors="replace")


def describe_exit(code: int | None) -> str:
    if code is None:
        return "not started"
    if code < 0:
        name = signal.Signals(-code).name
        hint = " (killed from outside; possibly the kernel's OOM killer)" if name == "SIGKILL" \
            else ""
        return f"signal {name}{hint}"
    return f"exit code {code}"
