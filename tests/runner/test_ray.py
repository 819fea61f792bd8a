"""--executor ray: the same faults through a real local Ray cluster, started once per module.

The head is started the way Ray documents it: ``ray start --head --block`` in a session of its
own, authentication off on both sides, ended by SIGTERM to that one process (never ``ray stop``,
which would end every Ray process on the host).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import ray  # the [ray] extra is part of the test install: missing, these tests fail

from tests.conftest import TORCHPORT, torchport
from tests.kb import recorded_results
from torchport.kb import open_store

NO_AUTH = {"RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def ray_head():
    """(address, pid of the head process: every node process descends from it)."""
    temp = tempfile.mkdtemp(prefix="tpr", dir="/tmp")  # short: socket paths have a length limit
    log_path = os.path.join(temp, "head.log")
    with open(log_path, "w") as log:
        head = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "ray"),
                "start",
                "--head",
                "--block",
                "--port=0",
                "--num-cpus=2",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={temp}",
                f"--object-store-memory={128 * 2**20}",
            ],
            env={**os.environ, **NO_AUTH},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        address, deadline = None, time.monotonic() + 120
        while address is None:
            assert head.poll() is None, open(log_path).read()[-3000:]
            assert time.monotonic() < deadline, open(log_path).read()[-3000:]
            found = re.search(r"ray start --address='([^']+)'", open(log_path).read())
            address = found.group(1) if found else None
            time.sleep(0.2)
        yield address, head.pid
    finally:
        head.send_signal(signal.SIGTERM)  # that one process; it ends its own children
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # anything of its group that stayed
        except ProcessLookupError:
            pass
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_address(ray_head):
    return ray_head[0]


def _ray_run(address, db, cwd, *args):
    return torchport(
        "run",
        "--executor",
        "ray",
        "--ray-address",
        address,
        "--device",
        "cpu",
        "--probes",
        "none",
        *args,
        "--db",
        db,
        "--json",
        cwd=cwd,
        env=NO_AUTH,
    )


def test_faults_through_ray_are_results_traces_come_back_each_node_has_its_environment(
    ray_address, tmp_path
):
    db = tmp_path / "kb.db"
    proc = _ray_run(
        ray_address,
        db,
        tmp_path,
        "--suite",
        "planted",
        "--cases",
        "hang,segfault,cumsum",
        "--modes",
        "eager",
        # the hang must reach it; the others must not, even on a loaded 2-core host where the
        # cumsum case's profile probe alone took over 8 s
        "--timeout",
        "20",
        "--jobs",
        "2",
        "--profile",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    statuses = {r["case"]: (r["status"], r["stage"]) for r in out["results"]}
    # What a local run of the same plan records (tests/runner/test_parallel.py).
    assert statuses == {
        "planted/hang": ("timeout", "run"),
        "planted/segfault": ("crash", "run"),
        "planted/cumsum": ("pass", None),
    }
    assert (
        "SIGSEGV"
        in next(r for r in out["results"] if r["case"] == "planted/segfault")["error"]["message"]
    )
    # The trace written on the actor's node came back to this run's artifact folder.
    traces = next(r for r in out["results"] if r["case"] == "planted/cumsum")["artifacts"]
    assert len(traces) == 1 and traces[0].startswith(str(tmp_path / "artifacts"))
    assert os.path.getsize(traces[0]) > 1000
    store = open_store(str(db), write=False)
    for result in out["results"]:
        share = result["findings"]["worker_share"]
        assert share["ray_node_id"] and share["threads"] == 1
        assert share["env"]["OMP_NUM_THREADS"] == "1"
        environment = store._environment(result["findings"]["environment_id"])
        assert environment["host"] and environment["torch"]


def test_a_device_no_node_offers_is_a_clear_error_not_a_hang(ray_address, tmp_path):
    started = time.monotonic()
    proc = _ray_run(
        ray_address,
        tmp_path / "kb.db",
        tmp_path,
        "--device",
        "simdev",
        "--suite",
        "smoke",
        "--cases",
        "mlp",
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "no node of the Ray cluster offers resource 'device:simdev'" in proc.stderr
    assert time.monotonic() - started < 120


def _node_workers(head_pid: int) -> list[psutil.Process]:
    """torchport workers on the test's Ray node: its actors start them, so they descend from
    the head process, not from the driver."""
    found = []
    for proc in psutil.Process(head_pid).children(recursive=True):
        try:
            if "torchport.runner.executors.worker" in proc.cmdline():
                found.append(proc)
        except psutil.Error:  # ended between listing and reading
            pass
    return found


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_sigint_through_ray_leaves_no_worker_and_resume_completes(ray_head, tmp_path):
    (ray_address, head_pid), db = ray_head, tmp_path / "kb.db"
    args = ["--suite", "planted", "--cases", "hang,compile_bomb,graph_break", "--modes", "eager"]
    proc = subprocess.Popen(
        [TORCHPORT, "run", "--executor", "ray", "--ray-address", ray_address, "--device", "cpu"]
        + ["--probes", "none", "--timeout", "30", "--jobs", "2", "--db", str(db), "--json"]
        + args,
        cwd=tmp_path,
        env={**os.environ, **NO_AUTH},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline, workers = time.monotonic() + 180, []
    while not recorded_results(db):
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    while not workers:  # the hang's worker is still running (30 s deadline)
        workers = _node_workers(head_pid)
        assert time.monotonic() < deadline
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=90)
    assert proc.returncode == 130, proc.stderr.read().decode()[-3000:]
    gone, alive = psutil.wait_procs(workers, timeout=60)
    assert not alive and not _node_workers(head_pid)
    store = open_store(str(db), write=False)
    run = store.get_run(store.runs(latest=True)[0]["id"])
    before = store.results(run_id=run["id"], keys=True)
    assert run["state"] == "interrupted" and ("planted/hang", "eager") not in before
    resumed = torchport(
        "run", "--resume", run["id"], "--db", db, "--json", cwd=tmp_path, env=NO_AUTH
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    out = json.loads(resumed.stdout)
    assert out["state"] == "complete" and len(out["results"]) == 3
    assert {r["case"]: r["status"] for r in out["results"]} == {
        "planted/hang": "timeout",
        "planted/compile_bomb": "pass",
        "planted/graph_break": "pass",
    }


@pytest.fixture
def connected(ray_address, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray.init(address=ray_address, log_to_driver=False, logging_level="WARNING")
    yield
    ray.shutdown()


def _executor(**overrides):
    from torchport.config import RunConfig
    from torchport.runner.executors.ray_executor import RayExecutor

    config = RunConfig(
        **{
            "suite": "planted",
            "modes": ("eager",),
            "device": "cpu",
            "probes": (),
            "executor": "ray",
            **overrides,
        }
    )
    return RayExecutor.connect(config), config


# Deadlines here bound a failure, never a pass: an actor's start (a Ray worker process, then a
# torchport worker importing torch) took over 120 s in issue 44's loaded runs (four suites side
# by side under two CPU burners on 2 cores), so they are minutes, and a case's own timeout is
# longer than every wait of the test put together.
START_S = 600


def _running(executor, case, limit_s=START_S):
    """The slot running ``case`` once its actor has started (results met meanwhile kept)."""
    seen, deadline = [], time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for slot in executor.slots:
            if (
                slot.task is not None
                and slot.task.case == case
                and not slot.starting
                and slot.where.get("pid")
            ):
                return slot, seen
        finished = executor.next_result(timeout_s=0.2)
        if finished is not None:
            seen.append(finished)
    met = [(f.task.case, f.result["status"], f.result.get("error")) for f in seen]
    raise AssertionError(f"{case} never started in {limit_s} s; results met meanwhile: {met}")


def _worker_of(actor_pid, limit_s=START_S):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for child in psutil.Process(actor_pid).children(recursive=True):
            try:
                if "torchport.runner.executors.worker" in child.cmdline():
                    return child
            except psutil.Error:  # ended between listing and reading
                pass
        time.sleep(0.1)
    raise AssertionError("the actor started no torchport worker")


@pytest.mark.slow
def test_a_segfault_a_hang_and_a_sigkill_leave_the_other_actor_alone(connected):
    from torchport.runner.plan import expand

    executor, config = _executor(
        cases=("hang", "segfault", "cumsum"), timeout_s=3 * START_S, jobs=2
    )
    try:
        for task in expand(config):
            executor.submit(task)
        hung, seen = _running(executor, "planted/hang")
        while len(seen) < 2:
            finished = executor.next_result(timeout_s=START_S)
            assert finished is not None
            seen.append(finished)
        assert {f.task.case: f.result["status"] for f in seen} == {
            "planted/segfault": "crash",
            "planted/cumsum": "pass",
        }
        actor_pid = hung.where["pid"]
        _worker_of(actor_pid).kill()  # SIGKILL the case's worker: the actor must survive
        finished = executor.next_result(timeout_s=START_S)
        assert finished.task.case == "planted/hang"
        assert finished.result["status"] == "crash"
        assert "SIGKILL" in finished.result["error"]["message"]
        assert psutil.pid_exists(actor_pid) and hung.actor is not None
    finally:
        executor.close()


def test_a_lost_actor_is_retried_then_recorded_with_each_loss(connected):
    from torchport.runner.plan import expand

    executor, config = _executor(cases=("hang",), timeout_s=3 * START_S, jobs=1, ray_retries=1)
    try:
        executor.submit(expand(config)[0])
        pids = []
        for _ in range(2):  # the first loss is retried on a fresh actor, the second is final
            slot, seen = _running(executor, "planted/hang")
            assert not seen and slot.where["pid"] not in pids
            worker = _worker_of(slot.where["pid"])
            pids.append(slot.where["pid"])
            os.kill(slot.where["pid"], signal.SIGKILL)  # the Ray worker itself dies
            # The orphaned torchport worker ends itself (its watchdog saw its parent go).
            psutil.wait_procs([worker], timeout=60)
            assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
            if len(pids) == 1:
                assert executor.next_result(timeout_s=0.5) is None
        finished = executor.next_result(timeout_s=START_S)
        result = finished.result
        assert (result["status"], result["error"]["type"]) == ("crash", "WorkerLost")
        assert "lost 2 time(s), retries allowed: 1" in result["error"]["message"]
        attempts = result["findings"]["ray_attempts"]
        assert len(attempts) == 2 and all(
            "ActorDied" in a["reason"] or "RayActorError" in a["reason"] for a in attempts
        )
    finally:
        executor.close()


def test_an_actor_ray_cannot_place_ends_the_run_with_the_reason(connected):
    from torchport.config import RunConfig
    from torchport.runner.executors.protocol import ExecutorBroken
    from torchport.runner.executors.ray_executor import RayExecutor
    from torchport.runner.plan import expand

    config = RunConfig(
        suite="planted",
        cases=("cumsum", "graph_break"),
        modes=("eager",),
        device="cpu",
        probes=(),
        executor="ray",
    )
    # As if the only node offering the device left after the run began.
    executor = RayExecutor(
        config=config,
        options={"num_cpus": 1, "resources": {"device:gone": 1}},
        threads=1,
        placement_timeout_s=2,
    )
    try:
        for task in expand(config):
            executor.submit(task)
        first = executor.next_result(timeout_s=30)
        assert (first.result["status"], first.result["stage"]) == ("crash", "worker_start")
        assert "no live node offers it" in first.result["error"]["message"]
        assert executor.next_result(timeout_s=30).result["stage"] == "worker_start"
        with pytest.raises(ExecutorBroken, match="device:gone"):
            executor.next_result(timeout_s=30)
    finally:
        executor.close()
