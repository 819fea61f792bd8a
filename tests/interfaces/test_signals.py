"""SIGTERM and SIGKILL to the commands that fork readers (export, baseline save, gate,
compare --json) at several moments (issue 44): no process is left (a forked reader dies with
its parent, PR_SET_PDEATHSIG; before, one blocked in a pipe write for minutes holding the
database open), no temporary file is left beside the output, no process holds the database,
and SIGTERM ends the command with 143.

The commands under signal run through ``signal_driver.py``: the CLI's own ``main`` (what the
installed ``torchport`` script calls) in a process whose reads are cut in tiny parts and whose
forked children mark when they start, so a signal lands at a known moment; the baseline they
gate against is made by the installed script, as a user makes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import kb
from tests.conftest import torchport

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "signal_driver.py")


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("signals")
    path = kb.build(folder / "kb.db", labels={"release": "a"})
    kb.build(path, run_id="r2", labels={"release": "b"})
    saved = torchport("baseline", "save", "r1", "-o", folder / "base.json", "--db", path)
    assert saved.returncode == 0, saved.stderr
    return path


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its new parent, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _holders(path: str) -> list[int]:
    """The processes with ``path`` open."""
    target = os.path.realpath(path)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    found.append(int(pid))
                    break
            except OSError:
                continue
    return found


def _wait_for(check, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


COMMANDS = {
    "export": ["export", "r1", "-o", "{out}/r1.jsonl"],
    "baseline save": ["baseline", "save", "r1", "-o", "{out}/base.json"],
    "gate": ["gate", "r2", "--baseline", "{base}"],
    "compare --json": ["compare", "r1", "r2", "--json"],
}


def _signalled(kb_path, tmp_path, name: str, signum: int, moment: str):
    marks, out = tmp_path / "marks", tmp_path / "out"
    marks.mkdir()
    out.mkdir()
    base = os.path.join(os.path.dirname(kb_path), "base.json")
    args = [a.format(out=out, base=base) for a in COMMANDS[name]] + ["--db", str(kb_path)]
    env = dict(os.environ, SIGNAL_MARKS=str(marks), SIGNAL_HOLD_S="120")
    proc = subprocess.Popen(
        [sys.executable, DRIVER, *args], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wanted = "started" if moment == "start" else "child-"
        assert _wait_for(lambda: any(m.startswith(wanted) for m in os.listdir(marks))), (
            proc.poll(),
            proc.stderr.read() if proc.poll() is not None else "",
        )
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    children = [int(m.split("-")[1]) for m in os.listdir(marks) if m.startswith("child-")]
    return proc.returncode, stderr, children, out


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_a_signal_while_a_forked_reader_works_leaves_nothing(kb_path, tmp_path, name, signum):
    code, stderr, children, out = _signalled(kb_path, tmp_path, name, signum, "child")
    assert children, "no forked reader was started"
    assert code == (128 + signal.SIGTERM if signum == signal.SIGTERM else -signal.SIGKILL), stderr
    if signum == signal.SIGTERM:
        assert "Traceback" not in stderr, stderr
    # the readers die with their parent (they held for 120 s)
    assert _wait_for(lambda: not any(_alive(pid) for pid in children), 10), children
    assert os.listdir(out) == []  # no output, no hidden .NAME.xxxx.tmp
    assert _holders(kb_path) == []  # nothing holds the database open


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_a_signal_as_the_command_starts_leaves_nothing(kb_path, tmp_path, name, signum):
    code, stderr, children, out = _signalled(kb_path, tmp_path, name, signum, "start")
    assert code in (128 + signal.SIGTERM, -signal.SIGTERM, -signal.SIGKILL), stderr
    assert _wait_for(lambda: not any(_alive(pid) for pid in children), 10), children
    assert os.listdir(out) == []
    assert _holders(kb_path) == []
