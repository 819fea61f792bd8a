"""--jobs N: workers side by side; one worker's fault never holds up or spoils the others."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time

import psutil
import pytest

from tests.conftest import TORCHPORT, torchport
from tests.kb import recorded_results

PLANTED = (
    "--suite",
    "planted",
    "--cases",
    "segfault,cumsum,graph_break",
    "--modes",
    "eager",
    "--device",
    "cpu",
    "--probes",
    "none",
    "--timeout",
    "60",
)
# Every planted fault in both modes, with a deadline that a loaded machine's compiles fit in
# (the hang's timeout is compared in the tests below, where its deadline can be short).
PLANTED_FULL = (
    "--suite",
    "planted",
    "--cases",
    "abort,segfault,compile_bomb,compile_wrong,oom",
    "--device",
    "cpu",
    "--probes",
    "none",
    "--timeout",
    "240",
)
SMOKE_MLP = ("--suite", "smoke", "--cases", "mlp", "--device", "cpu", "--probes", "none")


def _statuses(out):
    return {(r["case"], r["mode"]): (r["status"], r["stage"]) for r in out["results"]}


def _serial_and_parallel(tmp_path, plan):
    runs = {}
    for jobs in ("1", "2"):
        proc = torchport(
            "run", *plan, "--jobs", jobs, "--db", tmp_path / "kb.db", "--json", cwd=tmp_path
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[jobs] = json.loads(proc.stdout)
    assert _statuses(runs["2"]) == _statuses(runs["1"])
    return runs


def test_parallel_statuses_equal_a_serial_run_of_the_same_plan(tmp_path):
    runs = _serial_and_parallel(tmp_path, PLANTED)
    assert _statuses(runs["2"]) == {
        ("planted/segfault", "eager"): ("crash", "run"),
        ("planted/cumsum", "eager"): ("pass", None),
        ("planted/graph_break", "eager"): ("pass", None),
    }
    shares = [r["findings"]["worker_share"] for r in runs["2"]["results"]]
    threads = max(1, len(os.sched_getaffinity(0)) // 2)
    assert {s["slot"] for s in shares} == {0, 1}
    assert all(
        s["threads"] == threads and s["env"]["OMP_NUM_THREADS"] == str(threads) for s in shares
    )


@pytest.mark.slow
@pytest.mark.parametrize("plan", [PLANTED_FULL, SMOKE_MLP], ids=["planted", "smoke-mlp"])
def test_every_planted_fault_and_smoke_mlp_equal_serial(tmp_path, plan):
    runs = _serial_and_parallel(tmp_path, plan)
    assert len(runs["2"]["results"]) == (10 if plan is PLANTED_FULL else 2)


def test_a_segfault_a_hang_and_a_sigkill_in_one_worker_leave_the_others_alone():
    from torchport import api
    from torchport.config import RunConfig
    from torchport.runner.plan import expand

    # The perf probe records the thread count torch really ran with: the share must hold.
    config = RunConfig(
        suite="planted",
        cases=("hang", "segfault", "cumsum", "graph_break"),
        modes=("eager",),
        device="cpu",
        probes=("perf",),
        perf_budget_s=0.1,
        timeout_s=120,
        jobs=2,
    )
    executor = api.make_executor(config)
    started = time.monotonic()
    try:
        for task in expand(config):  # hang goes to the first worker, the rest to the second
            executor.submit(task)
        others = {}
        while len(others) < 3:
            finished = executor.next_result(timeout_s=100)
            assert finished is not None, "a result is missing"
            assert finished.task.case != "planted/hang", finished.result
            others[finished.task.case] = finished.result["status"]
            if finished.result["status"] == "pass":
                threads = finished.result["findings"]["worker_share"]["threads"]
                assert f'"torch_threads": {threads},' in json.dumps(finished.result["findings"])
        assert others == {
            "planted/segfault": "crash",
            "planted/cumsum": "pass",
            "planted/graph_break": "pass",
        }
        assert time.monotonic() - started < 100  # not waiting for the hang's deadline
        hung = next(slot for slot in executor.slots if slot.task is not None)
        assert hung.task.case == "planted/hang"
        os.kill(hung.worker.child.pid, signal.SIGKILL)  # from outside, as the OOM killer would
        finished = executor.next_result(timeout_s=30)
        assert finished.task.case == "planted/hang"
        assert (finished.result["status"], finished.result["stage"]) == ("crash", "run")
        assert "SIGKILL" in finished.result["error"]["message"]
        assert executor.next_result(timeout_s=1) is None  # nothing queued, nothing running
        pids = [s.warm.child.pid for s in executor.slots if s.warm is not None]
    finally:
        executor.close()
    assert pids and not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        for pid in pids
    )


def _workers_of(proc: subprocess.Popen) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if "torchport.runner.executors.worker" in child.cmdline():
                found.append(child)
        except psutil.Error:  # ended (or a zombie) between listing and reading
            pass
    return found


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_sigint_with_two_workers_leaves_no_process_and_resume_completes(db, tmp_path):
    # The hang keeps one worker busy while the other finishes the rest: SIGINT lands with two
    # workers alive, one of them mid-task.
    proc = subprocess.Popen(
        [
            TORCHPORT,
            "run",
            "--suite",
            "planted",
            "--cases",
            "hang,compile_bomb,graph_break",
            "--modes",
            "eager",
            "--device",
            "cpu",
            "--probes",
            "none",
            "--timeout",
            "30",
            "--jobs",
            "2",
            "--db",
            str(db),
            "--json",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    workers: list[psutil.Process] = []
    while recorded_results(db) < 1:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        workers = _workers_of(proc) or workers
        time.sleep(0.1)
    workers = _workers_of(proc) or workers
    assert len(workers) == 2, [w.cmdline() for w in workers]
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=60)
    assert proc.returncode == 130
    gone, alive = psutil.wait_procs(workers, timeout=60)
    assert not alive
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT state FROM runs").fetchone()[0] == "interrupted"
        before = set(conn.execute("SELECT case_id, mode FROM results").fetchall())
    assert 1 <= len(before) < 3 and ("planted/hang", "eager") not in before
    run_id = json.loads(torchport("runs", "--db", db, "--json").stdout)[0]["id"]
    resumed = torchport("run", "--resume", run_id, "--db", db, "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    out = json.loads(resumed.stdout)
    assert out["state"] == "complete" and len(out["results"]) == 3
    assert len({(r["case"], r["mode"]) for r in out["results"]}) == 3  # nothing ran twice
    assert _statuses(out) == {
        ("planted/hang", "eager"): ("timeout", "run"),
        ("planted/compile_bomb", "eager"): ("pass", None),
        ("planted/graph_break", "eager"): ("pass", None),
    }
    resumed_here = [r for r in out["results"] if (r["case"], r["mode"]) not in before]
    assert all("worker_share" in r["findings"] for r in resumed_here)  # --jobs 2 again


def test_jobs_beyond_what_the_device_allows_is_one_line_exit_2(tmp_path):
    proc = torchport(
        "run",
        "--device",
        "cpu",
        "--executor",
        "local",
        "--jobs",
        "0",
        "--db",
        tmp_path / "kb.db",
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "--jobs must be a positive integer" in proc.stderr
    assert not (tmp_path / "kb.db").exists()
