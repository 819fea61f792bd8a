"""Parent side of a compile child: start it, watch its stages, enforce both time limits.

The child (``compile_child``) runs in its own process group. While it says its stage is
"compile", the compile time limit runs; the whole child is also held to the deadline it was
given (what is left of the case's time). Past either, the group is killed and the outcome says
which limit ended it. Outcomes are data: the probe never waits without a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from torchport.runner.channel import LineReader
from torchport.runner.pool import describe_exit, log_tail
from torchport.timing import clock

TAIL_CHARS = 3000


@dataclass
class ChildOutcome:
    """ended: "result" (the child reported), "compile_timeout", "deadline" or "crash"."""

    ended: str
    result: dict | None = None
    records: list = field(default_factory=list)
    stage: str | None = None
    elapsed_s: float = 0.0
    exit: str | None = None
    tail: str = ""


class Child:
    """One ``python -m torchport.probes.compile_child`` process and its event stream."""

    def __init__(self, spec: dict, env: dict | None, log_dir: str):
        read_fd, write_fd = os.pipe()
        self.log = tempfile.NamedTemporaryFile("w+b", dir=log_dir, prefix=f"{spec['task']}-",
                                               suffix=".log", delete=False)
        self.started = clock()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torchport.probes.compile_child", "--fd", str(write_fd),
             "--spec", json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
            pass_fds=(write_fd,), env=env, start_new_session=True)
        os.close(write_fd)
        self.reader = LineReader(read_fd)
        self.outcome = ChildOutcome(ended="crash")
        self.done = False

    def wait_ready(self, deadline: float) -> None:
        """Read until a held child says ready (or ends: its outcome is then kept)."""
        self._read(deadline, None, until="ready")

    def go(self) -> None:
        """Release a held child; from here its time counts as its own (``elapsed_s``)."""
        self.started = clock()
        if not self.done:
            try:
                self.proc.stdin.write(b"go\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass  # it died while held: finish() reports how

    def finish(self, deadline: float, compile_timeout_s: float | None) -> ChildOutcome:
        """Read until the result, or until a limit passes; then end the process group."""
        self._read(deadline, compile_timeout_s, until="result")
        self.kill()
        return self.outcome

    def _read(self, deadline: float, compile_timeout_s: float | None, until: str) -> None:
        compile_deadline = None
        while not self.done:
            limit = deadline if compile_deadline is None else min(deadline, compile_deadline)
            line = self.reader.next_line(limit)
            if line is None:
                if clock() >= limit:  # a limit passed
                    self.outcome.ended = ("compile_timeout" if compile_deadline is not None
                                          and clock() >= compile_deadline else "deadline")
                self.done = True  # else end of stream: the child died without a result
                return
            event = json.loads(line)
            if event["event"] == "stage":
                self.outcome.stage = event["stage"]
                compile_deadline = (clock() + compile_timeout_s if event["stage"] == "compile"
                                    and compile_timeout_s else None)
            elif event["event"] == "record":
                self.outcome.records.append(event["record"])
            elif event["event"] == "result":
                self.outcome.ended, self.outcome.result = "result", event["result"]
                self.done = True
            if event["event"] == until:
                return

    def kill(self) -> None:
        """Kill the whole group (compile workers too). A child that reported has nothing left
        to do: its caches were written before its compiled step returned."""
        if self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        code = self.proc.wait()
        self.reader.close()
        self.proc.stdin.close()
        self.done = True
        self.outcome.elapsed_s = clock() - self.started
        self.outcome.exit = None if self.outcome.ended == "result" else describe_exit(code)
        self.log.flush()
        self.outcome.tail = log_tail(self.log, TAIL_CHARS)
        self.log.close()


def run_child(spec: dict, env: dict | None, *, deadline: float,
              compile_timeout_s: float | None, log_dir: str) -> ChildOutcome:
    """Run one child from start to end under both limits."""
    return Child(spec, env, log_dir).finish(deadline, compile_timeout_s)
