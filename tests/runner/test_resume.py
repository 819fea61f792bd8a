"""Kill a sweep mid-way: nothing finished is lost; --resume runs only what is missing."""

import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from tests.conftest import TORCHPORT, torchport
from tests.kb import recorded_results

CASES = "mlp,convnet"


def _start(db, cwd):
    return subprocess.Popen(
        [
            TORCHPORT,
            "run",
            "--suite",
            "smoke",
            "--cases",
            CASES,
            "--device",
            "cpu",
            "--probes",
            "none",
            "--compile-backend",  # what is tested is the interruption, not Inductor's build
            "aot_eager",
            "--db",
            str(db),
            "--json",
        ],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _wait_for_results(db, n, proc, limit_s=240):
    deadline = time.monotonic() + limit_s
    while recorded_results(db) < n:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)


def _resume_and_check(db, tmp_path, before):
    runs = json.loads(torchport("runs", "--db", db, "--json").stdout)
    assert runs[0]["state"] == "interrupted"
    run_id = runs[0]["id"]
    proc = torchport("run", "--resume", run_id, "--db", db, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT case_id, mode, finished_at FROM results ORDER BY id").fetchall()
    assert len(rows) == 4 and len({(r[0], r[1]) for r in rows}) == 4  # nothing run twice
    assert rows[: len(before)] == before  # nothing finished before the kill changed
    assert json.loads(torchport("runs", "--db", db, "--json").stdout)[0]["state"] == "complete"


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_sigkill_then_resume(db, tmp_path):
    proc = _start(db, tmp_path)
    _wait_for_results(db, 1, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the supervisor and its worker die at once
    proc.wait()
    with sqlite3.connect(db) as conn:
        before = conn.execute(
            "SELECT case_id, mode, finished_at FROM results ORDER BY id"
        ).fetchall()
    assert 1 <= len(before) < 4
    _resume_and_check(db, tmp_path, before)


def test_sigint_marks_interrupted(db, tmp_path):
    proc = _start(db, tmp_path)
    _wait_for_results(db, 1, proc)
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    assert proc.returncode == 130
    with sqlite3.connect(db) as conn:
        state = conn.execute("SELECT state FROM runs").fetchone()[0]
        before = conn.execute(
            "SELECT case_id, mode, finished_at FROM results ORDER BY id"
        ).fetchall()
    assert state == "interrupted"
    _resume_and_check(db, tmp_path, before)
