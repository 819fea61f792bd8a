"""Parent side of a compile child: start it, watch its stages, enforce both time limits.

The child (``compile_child``) runs in its own process group. While it says its stage is
"compile", the compile time limit runs; the whole child is also held to the deadline it was
given (what is left of the case's time). Past either, the group is killed and the outcome says
which limit ended it. Outcomes are data: the probe never waits without a deadline.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

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


def run_child(spec: dict, env: dict, *, deadline: float, compile_timeout_s: float | None,
              log_dir: str) -> ChildOutcome:
    """Run ``python -m torchport.probes.compile_child`` for ``spec`` under both limits."""
    read_fd, write_fd = os.pipe()
    log = tempfile.NamedTemporaryFile("w+b", dir=log_dir, prefix=f"{spec['task']}-",
                                      suffix=".log", delete=False)
    started = clock()
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchport.probes.compile_child", "--fd", str(write_fd),
         "--spec", json.dumps(spec)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
        env=env, start_new_session=True)
    os.close(write_fd)
    outcome = ChildOutcome(ended="crash")
    buffer, compile_deadline = b"", None
    try:
        while True:
            limit = deadline if compile_deadline is None else min(deadline, compile_deadline)
            line, buffer = _next_line(read_fd, buffer, limit)
            if line is None:
                if clock() >= limit:  # a limit passed: end the whole group
                    outcome.ended = ("compile_timeout" if compile_deadline is not None
                                     and clock() >= compile_deadline else "deadline")
                break  # else end of stream: the child died without a result
            event = json.loads(line)
            if event["event"] == "stage":
                outcome.stage = event["stage"]
                compile_deadline = (clock() + compile_timeout_s if event["stage"] == "compile"
                                    and compile_timeout_s else None)
            elif event["event"] == "record":
                outcome.records.append(event["record"])
            elif event["event"] == "result":
                outcome.ended, outcome.result = "result", event["result"]
                break
    finally:
        code = _stop(proc)
        os.close(read_fd)
        outcome.elapsed_s = clock() - started
        outcome.exit = None if outcome.ended == "result" else describe(code)
        outcome.tail = _tail(log)
        log.close()
    return outcome


def _next_line(fd: int, buffer: bytes, deadline: float) -> tuple[bytes | None, bytes]:
    """The next line from ``fd``, or None at end of stream or when ``deadline`` passes."""
    while b"\n" not in buffer:
        remaining = deadline - clock()
        if remaining <= 0:
            return None, buffer
        ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return None, buffer
        buffer += chunk
    line, buffer = buffer.split(b"\n", 1)
    return line, buffer


def _stop(proc: subprocess.Popen) -> int:
    """Kill the child's whole group (its compile workers too). A child that has reported has
    nothing left to do: its caches were written before its compiled step returned."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.wait()


def describe(code: int | None) -> str:
    if code is None:
        return "not started"
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


def _tail(log) -> str:
    log.flush()
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - TAIL_CHARS))
    return log.read().decode(errors="replace")
