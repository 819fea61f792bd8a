"""The tool never crashes, leaves no process behind, and refuses bad input in one line.

Each test reproduces one item of the hardening issue through the installed ``torchport``
script, run from a folder other than the repository.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from tests.conftest import TORCHPORT, torchport
from torchport.cases.planted import ORPHAN_MARKER


def _marked_processes(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.fixture(scope="module")
def planted(planted_runs):
    out = planted_runs["hardening"]  # tests/runner/conftest.py: run beside test_faults' runs
    return {r["case"].split("/")[1]: r for r in out["results"]}, out


def test_cpu_allocator_failure_is_oom(planted):
    result = planted[0]["cpu_oom"]
    assert (result["status"], result["stage"]) == ("oom", "run")


def test_nan_on_both_sides_is_not_a_pass(planted):
    assert planted[0]["nan_loss"]["status"] == "accuracy_fail"


def test_no_process_outlives_its_worker(planted):
    assert planted[0]["orphan"]["status"] == "crash"
    deadline = time.monotonic() + 60  # bounds a failure: the watchdog polls; a loaded host is slow
    while _marked_processes(ORPHAN_MARKER) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _marked_processes(ORPHAN_MARKER)


def test_garbage_on_the_channel_is_a_crash_and_the_run_completes(planted):
    result = planted[0]["garbage_event"]
    assert result["status"] == "crash" and "malformed event" in result["error"]["message"]
    assert planted[1]["state"] == "complete"


def test_a_result_for_another_task_is_not_recorded_as_it(planted):
    result = planted[0]["forged_result"]
    assert (result["status"], result["stage"]) == ("crash", "record")
    assert "does not answer the task" in result["error"]["message"]
    assert not any(r["case"] == "planted/somebody_else" for r in planted[1]["results"])


def _start(tmp_path, *args):
    return subprocess.Popen(
        [
            TORCHPORT,
            "run",
            "--device",
            "cpu",
            "--probes",
            "none",
            *args,
            "--db",
            str(tmp_path / "kb.db"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _worker_of(proc: subprocess.Popen, limit_s: float = 60) -> psutil.Process:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        for child in psutil.Process(proc.pid).children(recursive=True):
            if "torchport.runner.executors.worker" in " ".join(child.cmdline()):
                return child
        time.sleep(0.2)
    raise AssertionError("no worker started")


def test_worker_dies_with_its_supervisor(tmp_path):
    proc = _start(
        tmp_path, "--suite", "planted", "--cases", "hang", "--modes", "eager", "--timeout", "600"
    )
    worker = _worker_of(proc)
    proc.send_signal(signal.SIGKILL)  # the supervisor alone: the worker is in its own group
    proc.wait()
    worker.wait(timeout=60)  # raises psutil.TimeoutExpired if the worker lives on


def test_sigterm_exits_143_and_marks_interrupted(tmp_path):
    proc = _start(
        tmp_path, "--suite", "planted", "--cases", "hang", "--modes", "eager", "--timeout", "600"
    )
    _worker_of(proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    with sqlite3.connect(tmp_path / "kb.db") as conn:
        assert conn.execute("SELECT state FROM runs").fetchone()[0] == "interrupted"


def test_resume_of_a_live_run_is_refused(tmp_path):
    proc = _start(
        tmp_path, "--suite", "planted", "--cases", "hang", "--modes", "eager", "--timeout", "600"
    )
    try:
        _worker_of(proc)
        with sqlite3.connect(tmp_path / "kb.db") as conn:
            run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
        out = torchport("run", "--resume", run_id, "--db", tmp_path / "kb.db")
        assert out.returncode == 2, out.stderr
        assert "still going" in out.stderr and str(proc.pid) in out.stderr
        assert "Traceback" not in out.stderr
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


REGRESSOR = """
import torch

def make():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    return {"model": model, "inputs": (x,),
            "loss_fn": lambda out: torch.nn.functional.mse_loss(out, y.to(out.device))}
"""


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_readme_workload_example_runs_from_its_folder(tmp_path):
    (tmp_path / "team_models").mkdir()
    (tmp_path / "team_models" / "regressor.py").write_text(REGRESSOR)
    out = torchport(
        "run",
        "--workload",
        "team_models.regressor:make",
        "--device",
        "cpu",
        "--modes",
        "eager",
        "--probes",
        "none",
        "--db",
        tmp_path / "kb.db",
        "--json",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["results"][0]["status"] == "pass"


def test_folder_does_not_shadow_the_standard_library_in_workers(tmp_path):
    marker = tmp_path / "shadowed"
    (tmp_path / "argparse.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise SystemExit('shadowed argparse imported')\n"
    )
    out = torchport(
        "run",
        "--suite",
        "smoke",
        "--cases",
        "mlp",
        "--modes",
        "eager",
        "--probes",
        "none",
        "--device",
        "cpu",
        "--db",
        tmp_path / "kb.db",
        "--json",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["results"][0]["status"] == "pass"
    assert not marker.exists()


@pytest.fixture(scope="module")
def check_limit_s() -> float:
    """The factory check's deadline for the broken factories: three times what the check
    child's imports (torch, the workload module) take on this machine now, at least 5 s. A
    fixed limit failed under load (``import torch`` alone takes 11 s at load 9)."""
    started = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, torchport.runner.check_workload, torchport.cases.workload",
        ],
        check=True,
        timeout=300,
    )
    return max(5.0, 3 * (time.monotonic() - started))


@pytest.mark.parametrize(
    "body,words",
    [
        ("import time\ndef make():\n    time.sleep(600)\n", "did not return within"),
        ("import ctypes\ndef make():\n    ctypes.string_at(0)\n", "SIGSEGV"),
        ("import sys\ndef make():\n    sys.exit(0)\n", "ended the process"),
        (
            "import torch\ndef make():\n    return {'model': torch.nn.Linear(2, 2), 'inputs': 5}\n",
            "'inputs' is int",
        ),
        (
            "import torch\ndef make():\n    return {'model': torch.nn.Linear(2, 2), "
            "'inputs': torch.ones(2), 'tolerance': 'x'}\n",
            "'tolerance' must be (atol, rtol)",
        ),
    ],
)
def test_broken_factories_are_one_line_and_record_nothing(tmp_path, body, words, check_limit_s):
    (tmp_path / "factory_mod.py").write_text(body)
    env = {"TORCHPORT_WORKLOAD_CHECK_TIMEOUT_S": f"{check_limit_s:.1f}"}
    out = torchport(
        "run",
        "--workload",
        "factory_mod:make",
        "--device",
        "cpu",
        "--db",
        tmp_path / "kb.db",
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], out.stderr
    assert not (tmp_path / "kb.db").exists()


def test_size_flags_a_factory_cannot_take_are_refused(tmp_path):
    (tmp_path / "team_models").mkdir()
    (tmp_path / "team_models" / "regressor.py").write_text(REGRESSOR)
    out = torchport(
        "run",
        "--workload",
        "team_models.regressor:make",
        "--batch",
        "64",
        "--device",
        "cpu",
        "--db",
        tmp_path / "kb.db",
        cwd=tmp_path,
    )
    assert out.returncode == 2 and "--batch given" in out.stderr, out.stderr
    assert not (tmp_path / "kb.db").exists()


def test_sized_factory_records_the_size_that_ran(tmp_path):
    (tmp_path / "sized.py").write_text(
        textwrap.dedent("""
        import torch

        def make(batch=4):
            return {"model": torch.nn.Linear(8, 2), "inputs": (torch.randn(batch, 8),)}
    """)
    )
    out = torchport(
        "run",
        "--workload",
        "sized:make",
        "--batch",
        "3",
        "--modes",
        "eager",
        "--probes",
        "none",
        "--device",
        "cpu",
        "--db",
        tmp_path / "kb.db",
        "--json",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)["results"][0]
    assert result["status"] == "pass"
    assert result["findings"]["workload"]["size"]["batch"] == 3


@pytest.mark.parametrize("flag", ["nan", "inf", "-1"])
def test_non_finite_timeouts_are_refused(tmp_path, flag):
    out = torchport(
        "run", "--timeout", flag, "--device", "cpu", "--db", tmp_path / "kb.db", cwd=tmp_path
    )
    assert out.returncode == 2 and "--timeout" in out.stderr, out.stderr
    assert not (tmp_path / "kb.db").exists()
