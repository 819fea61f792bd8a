"""The one supervised child process: every worker and every compile child is one of these.

Parent side (``Child``): the child starts in a new session (its own process group), with a pipe
for JSON events (its stdout and stderr go to a log file, so user code may print freely). The
parent reads events with a deadline, and ``kill`` always kills the whole group, also when the
child itself already exited (grandchildren such as compile workers share the group).

Child side (``Watchdog``): the child kills its own group when its supervisor dies (SIGKILL of
the sweep) or when it runs past the deadline of the work it was given, so no process outlives
the run that started it, whatever happened to the parent.

Descendants that leave the group (a workload's double-forked ``setsid`` daemon) are found too:
the supervisor makes itself a child subreaper (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``), so an
orphaned descendant is re-parented to it rather than to init, and every child carries a token
in its environment that its descendants inherit; ``kill`` ends every process of this user that
descends from the child or holds its token, and reaps those re-parented here.

Failures are described from exit codes and signals, never from words in error text; a kill
torchport made (a deadline, a start-up that never came) is described as such, never as an
outside kill.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import IO

from torchport.execution.channel import LineReader
from torchport.timing import clock

TAIL_CHARS = 4000
SUPERVISOR_PID_ENV = "TORCHPORT_SUPERVISOR_PID"
# Inherited by every descendant of one child: found by it after they left its process group.
CHILD_TOKEN_ENV = "TORCHPORT_CHILD_TOKEN"
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
# The folder holding the user's workload module: set once by the supervisor (``runner.plan.
# worker_env``, the workload check), inherited by every child below it (worker, reference,
# compile, doctor, workload check), and put on sys.path by the one bootstrap below.
WORKLOAD_PATH_ENV = "TORCHPORT_WORKLOAD_PATH"
# ``python -m`` would put the current folder first on sys.path, so a user's ``argparse.py``
# there would shadow the standard library inside every child. Drop that entry, add the
# workload's folder after the standard library, then run the module as ``-m`` would.
_BOOTSTRAP = (
    "import os, runpy, sys; del sys.path[0]; "
    f"sys.path.extend(filter(None, [os.environ.get('{WORKLOAD_PATH_ENV}')])); "
    "module = sys.argv.pop(1); runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


def owned_folder(prefix: str) -> str:
    """A new temporary folder that belongs to this process, ``<prefix>pid<PID>-<random>``:
    the supervisor that ends this process removes it (``Child.kill``), however the process
    ended (a SIGTERM or SIGKILL included), and ``remove_orphaned`` removes one whose process
    is gone. The process removes it itself when it can."""
    return tempfile.mkdtemp(prefix=f"{prefix}pid{os.getpid()}-")


def remove_owned(pid: int, where: str | None = None) -> None:
    """Every ``owned_folder`` of process ``pid`` (in ``where``: its temporary folder)."""
    where = where or tempfile.gettempdir()
    for path in glob.glob(os.path.join(where, f"torchport-*-pid{pid}-*")):
        shutil.rmtree(path, ignore_errors=True)


def remove_orphaned(prefix: str) -> list[str]:
    """The ``owned_folder``s of ``prefix`` whose process is gone (its supervisor was killed
    before it could remove them): removed, when they are this user's. Returns their paths."""
    removed = []
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{prefix}pid*-*")):
        pid = path[len(os.path.join(tempfile.gettempdir(), prefix)) + 3 :].split("-", 1)[0]
        try:
            mine = os.stat(path).st_uid == os.getuid()
        except OSError:
            continue
        if pid.isdigit() and mine and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class BadEvent(ValueError):
    """A line on the event channel that is not a JSON event object."""


_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (once; Linux only). False
    where the kernel or the platform has no such thing: descendants are then still found by
    their token while they live, but an orphan is re-parented to init."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                _subreaper = False
    return _subreaper


def _proc_parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def _proc_has_token(pid: int, token: bytes) -> bool:
    prefix = CHILD_TOKEN_ENV.encode() + b"="
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return False
    return any(e.startswith(prefix) and token in e[len(prefix) :].split(b":") for e in entries)


def descendants(root: int, token: str) -> list[int]:
    """Live processes below ``root`` (by parent links) or holding ``token`` in their
    environment; empty where there is no /proc."""
    try:
        pids = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    me = os.getpid()
    parents = {pid: _proc_parent(pid) for pid in pids}
    found = {pid for pid in pids if pid not in (me, root) and _proc_has_token(pid, token.encode())}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found and pid != me:
                found.add(pid)
                frontier.append(pid)
    return sorted(found)


class Child:
    """``python -m MODULE ARGS --fd N``, supervised."""

    def __init__(
        self, module: str, args: list[str], *, env: dict[str, str] | None, log_dir: str, name: str
    ):
        read_fd, write_fd = os.pipe()
        self.log: IO[bytes] = tempfile.NamedTemporaryFile(
            "w+b", dir=log_dir, prefix=f"{name}-", suffix=".log", delete=False
        )
        self.started = clock()
        self.token = uuid.uuid4().hex
        self.killed_here = False  # torchport killed it (a deadline), not something outside
        become_subreaper()
        # The child's watchdog watches this pid, not whatever parent it finds once it is up:
        # a supervisor killed while the child was still starting is noticed too.
        env = dict(os.environ if env is None else env)
        # A child of a child keeps its ancestors' tokens: each supervisor finds its strays.
        tokens = [t for t in env.get(CHILD_TOKEN_ENV, "").split(":") if t]
        env.update(
            {SUPERVISOR_PID_ENV: str(os.getpid()), CHILD_TOKEN_ENV: ":".join([*tokens, self.token])}
        )
        # where the child makes its temporary folders (its environment's, as tempfile reads it)
        self.tmpdir = next(
            (env[k] for k in ("TMPDIR", "TEMP", "TMP") if env.get(k)), tempfile.gettempdir()
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP, module, *args, "--fd", str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            env=env,
            start_new_session=True,
        )
        os.close(write_fd)
        self.reader = LineReader(read_fd)
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.returncode is None and self.proc.poll() is None

    def send(self, line: str) -> bool:
        """One line on the child's stdin; False when the child no longer reads."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((line.rstrip("\n") + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            return False
        return True

    def next_event(self, deadline: float) -> dict | None:
        """The next event, or None at end of stream or once ``deadline`` (clock) passes.

        Raises BadEvent for a line that is not a JSON object with an "event" key.
        """
        line = self.reader.next_line(deadline)
        return None if line is None else self._parse(line)

    def fileno(self) -> int | None:
        """The event channel's fd, for ``select`` over many children; None once closed."""
        return self.reader.fileno()

    def read_available(self) -> bool:
        """Read what the channel holds now (after ``select`` said so); False at end of stream."""
        return self.reader.fill()

    def buffered_event(self) -> dict | None:
        """An event already read, never waiting (``next_event`` for a multiplexed parent)."""
        line = self.reader.buffered_line()
        return None if line is None else self._parse(line)

    @staticmethod
    def _parse(line: bytes) -> dict:
        try:
            event = json.loads(line)
        except ValueError:
            raise BadEvent(f"not JSON: {line[:200]!r}") from None
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise BadEvent(f"not an event object: {line[:200]!r}")
        return event

    def wait_exit(self, timeout_s: float) -> None:
        """Give a child that is ending on its own a moment to report how it ended."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    def kill(self) -> int | None:
        """Kill the whole process group (always: survivors of a dead leader too) and every
        descendant that left it; the exit code."""
        if self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            self.killed_here = True
        strays = descendants(self.proc.pid, self.token)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.returncode = self.proc.wait()
        for pid in strays + descendants(self.proc.pid, self.token):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            if _proc_parent(pid) == os.getpid():  # re-parented here: reap it
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        self.reader.close()
        self.close_stdin()
        remove_owned(self.proc.pid, self.tmpdir)  # its temporary folders, whatever ended it
        return self.returncode

    def tail(self, chars: int = TAIL_CHARS) -> str:
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return log_tail(f, chars)

    def exit_description(self) -> str:
        return describe_exit(self.returncode, killed_here=self.killed_here)

    def remove_log(self) -> None:
        self.log.close()
        try:
            os.unlink(self.log.name)
        except FileNotFoundError:
            pass


def log_tail(log, chars: int) -> str:
    """The last ``chars`` bytes of a binary log file, decoded."""
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - chars))
    return log.read().decode(errors="replace")


def describe_exit(code: int | None, *, killed_here: bool = False) -> str:
    if code is None:
        return "not started"
    if code < 0:
        name = signal.Signals(-code).name
        if name == "SIGKILL" and killed_here:
            return "signal SIGKILL (killed by torchport)"
        hint = (
            " (killed from outside; possibly the kernel's OOM killer)" if name == "SIGKILL" else ""
        )
        return f"signal {name}{hint}"
    return f"exit code {code}"


class LogFolder:
    """Where children's logs go for one run: removed at the end unless a failure kept a log."""

    def __init__(self, prefix: str = "torchport-logs-"):
        self.path = tempfile.mkdtemp(prefix=prefix)
        self.kept: list[str] = []

    def keep(self, path: str) -> str:
        self.kept.append(path)
        return path

    def close(self) -> None:
        if not self.kept:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        for entry in os.listdir(self.path):  # keep only the logs a failure names
            full = os.path.join(self.path, entry)
            if full not in self.kept:
                try:
                    os.unlink(full)
                except OSError:
                    pass


class Watchdog:
    """Child side: end this process group when the supervisor dies or a deadline passes."""

    POLL_S = 0.5

    def __init__(self) -> None:
        # Popped: a process this one starts by other means must not watch our supervisor.
        self.parent = int(os.environ.pop(SUPERVISOR_PID_ENV, None) or os.getppid())
        self.deadline: float | None = None  # time.monotonic() value
        threading.Thread(target=self._watch, name="torchport-watchdog", daemon=True).start()

    def arm(self, seconds: float | None) -> None:
        """Hold the work now starting to ``seconds`` (None: no limit but the parent's life)."""
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def _watch(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            orphaned = os.getppid() != self.parent
            late = self.deadline is not None and time.monotonic() > self.deadline
            if orphaned or late:
                os.killpg(os.getpgrp(), signal.SIGKILL)
