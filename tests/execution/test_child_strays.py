"""Issue 35 (5, 6): a supervised child's descendants that left its process group are killed
with it; a worker stopped while starting is killed by its start-up deadline, and a kill
torchport made is described as torchport's, not as the OOM killer's."""

from __future__ import annotations

import os
import signal
import time

from tests.conftest import REPO
from torchport.execution.child import Child, LogFolder, describe_exit


def _daemon_pid(pidfile: str) -> int:
    for _ in range(300):
        if os.path.exists(pidfile):
            return int(open(pidfile).read())
        time.sleep(0.05)
    raise AssertionError("the daemon never wrote its pid")


def _alive(pid: int) -> bool:
    """Alive and not a zombie (a zombie is dead, only not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _child(tmp_path, then: str) -> tuple[Child, str]:
    pidfile = str(tmp_path / "daemon.pid")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = Child(
        "tests.execution.daemonizer",
        [pidfile, then],
        env=env,
        log_dir=LogFolder().path,
        name="daemonizer",
    )
    return child, pidfile


def test_a_double_forked_setsid_daemon_dies_with_the_child(tmp_path):
    child, pidfile = _child(tmp_path, "run")
    daemon = _daemon_pid(pidfile)
    try:
        assert os.getpgid(daemon) != os.getpgid(child.pid)  # it left the group
        child.kill()
        for _ in range(100):
            if not _alive(daemon):
                break
            time.sleep(0.05)
        assert not _alive(daemon), "the daemon outlived its supervised child"
        assert child.exit_description() == "signal SIGKILL (killed by torchport)"
    finally:
        if _alive(daemon):
            os.kill(daemon, signal.SIGKILL)


def test_a_worker_stopped_while_starting_meets_its_start_up_deadline(tmp_path):
    from torchport.runner.executors.local import WorkerProcess, WorkerStartError, start_deadline_s

    logs = LogFolder()
    worker = WorkerProcess("cpu", dict(os.environ), logs)
    os.kill(worker.child.pid, signal.SIGSTOP)  # stopped before it could say it is ready
    began = time.monotonic()
    try:
        worker.start(timeout_s=3)
    except WorkerStartError as exc:
        message = str(exc)
    else:
        raise AssertionError("a stopped worker was taken as ready")
    finally:
        worker.close()
    assert time.monotonic() - began < 30
    assert "start-up deadline; torchport killed it" in message
    assert "OOM" not in worker.child.exit_description()
    assert start_deadline_s(6) == 60 and start_deadline_s(120) == 120
    assert start_deadline_s(10_000) == 300


def test_an_outside_kill_is_still_described_as_one():
    assert "OOM killer" in describe_exit(-signal.SIGKILL)
    assert (
        describe_exit(-signal.SIGKILL, killed_here=True) == "signal SIGKILL (killed by torchport)"
    )
