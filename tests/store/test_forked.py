"""A part of a read done by a forked child (kb/forked.py): its value comes back, its
failure or its death is one StoreError, and a child nobody waits for is ended."""

import os
import subprocess
import sys
import threading
import time

import pytest

from torchport.kb import StoreError, forked


def test_the_childs_value_comes_back_and_it_runs_in_another_process():
    with forked.Child(lambda: (os.getpid(), [1, "two"])) as child:
        pid, value = child.value()
    assert pid != os.getpid() and value == [1, "two"]


def test_a_failure_in_the_child_is_one_store_error_naming_it():
    def work():
        raise ValueError("no such column: grade")

    with forked.Child(work) as child, pytest.raises(StoreError) as failed:
        child.value()
    assert "ValueError: no such column: grade" in str(failed.value)


def test_a_child_that_dies_without_an_answer_says_how_it_ended():
    with forked.Child(lambda: os._exit(3)) as child, pytest.raises(StoreError) as failed:
        child.value()
    assert "ended without an answer (exit code 3)" in str(failed.value)


def test_a_child_nobody_waits_for_is_ended_with_the_block():
    with forked.Child(lambda: time.sleep(60)) as child:
        process = child._process
    assert not process.is_alive()


def test_parts_are_asked_for_only_where_a_child_can_help(monkeypatch):
    """A core for the child, a platform that forks safely, and one thread (a server's others
    could hold a lock the child would inherit held)."""
    monkeypatch.setattr(forked.threading, "active_count", lambda: 1)
    monkeypatch.setattr(forked, "cores", lambda: 1)
    assert not forked.available() and forked.workers() == 1
    monkeypatch.setattr(forked, "cores", lambda: 2)
    linux = os.uname().sysname.startswith("Linux")
    assert forked.available() == linux and forked.workers() == (2 if linux else 1)
    monkeypatch.undo()
    monkeypatch.setattr(forked, "cores", lambda: 2)
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not forked.available() and forked.workers() == 1
    finally:
        release.set()
        other.join()


def test_spread_gives_the_parts_values_in_order_and_ends_the_children_when_here_fails():
    mine, theirs = forked.spread([1, 2, 3], lambda p: ("here", p), lambda p: (os.getpid(), p))
    assert mine == ("here", 1) and [p for _, p in theirs] == [2, 3]
    assert all(pid != os.getpid() for pid, _ in theirs)

    def here(part):
        raise ValueError("the first part failed")

    def apart(part):
        time.sleep(60)

    begun = time.monotonic()
    with pytest.raises(ValueError, match="first part failed"):
        forked.spread([1, 2], here, apart)
    assert time.monotonic() - begun < 30  # the child was ended, not waited for


# A SIGTERM that lands while a reader is forked: its handler ran inside an at-fork callback
# (here one that keeps the interpreter busy after the signal, as logging's lock release did in
# a loaded `make test`), where the Terminated it raises is printed and dropped, and the command
# went on for as long as its work took (`test_signals.py`'s `baseline save` hung past 60 s).
_SIGNAL_DURING_FORK = """
import os, signal, sys
from torchport.interfaces import cli
from torchport.kb import forked

def busy_after_fork():
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(100_000):  # the interpreter checks for signals here: inside the callback
        pass

signal.signal(signal.SIGTERM, cli._terminated)
os.register_at_fork(after_in_parent=busy_after_fork)
try:
    with forked.Child(lambda: 1) as child:
        child.value()
except cli.Terminated:
    sys.exit(143)
print("the command went on after SIGTERM")
sys.exit(0)
"""


def test_a_sigterm_during_the_fork_ends_the_command_with_its_children():
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNAL_DURING_FORK], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 143, (proc.stdout, proc.stderr)
    assert "Exception ignored" not in proc.stderr


# The same signal landing in a finalizer: Python drops what a ``__del__`` raises. The command's
# hook sends the signal again, to be raised where it counts.
_SIGNAL_IN_A_FINALIZER = """
import os, signal, sys, time
from torchport.interfaces import cli

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):  # the interpreter checks for signals here: inside __del__
            pass

signal.signal(signal.SIGTERM, cli._terminated)
sys.unraisablehook = cli._swallowed
try:
    Finalized()
    until = time.monotonic() + 60  # the command's own work, which the signal must end
    while time.monotonic() < until:
        pass
except cli.Terminated:
    sys.exit(143)
print("the command went on after SIGTERM")
sys.exit(0)
"""


def test_a_sigterm_dropped_in_a_finalizer_still_ends_the_command():
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNAL_IN_A_FINALIZER], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 143, (proc.stdout, proc.stderr)
    assert "Exception ignored" not in proc.stderr
