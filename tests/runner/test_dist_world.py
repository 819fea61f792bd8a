"""Real worlds that did not report, hung on an empty tensor, or moved no data: each ends
with a named verdict within its deadline, and nothing is left behind (no rank, no launcher,
no ``torchport-dist-*`` folder). Fast: the empty-tensor hang (on a backend that truncates
integer AVG) and the group that moves no data. Slow: a node missing, a held rendezvous port,
a SIGTERM of the run, a device with no collective backend through the CLI."""

from __future__ import annotations

import glob
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from tests.conftest import TORCHPORT
from torchport.cases.dist import DistCase, DistSpec, planted_dist_cases
from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.runner.dist.ladder import DistLadder
from torchport.runner.dist.launch import alive, descendants, free_port


@pytest.fixture
def tmp_dir(tmp_path, monkeypatch):
    """Temporary folders of this test (and of the processes it starts) under ``tmp_path``:
    whatever is left there after a world is what the world left behind."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path


def _run(case, *, timeout_s, device="cpu", **config):
    adapter = get_adapter(device)
    adapter.prepare()
    config = RunConfig(device=device, timeout_s=timeout_s, **config)
    start = time.monotonic()
    result = DistLadder(case, "eager", config, adapter, lambda e: None, {}).run()
    return result, time.monotonic() - start


def _nothing_left(tmp_dir):
    left = [p for p in descendants([os.getpid()]) if alive(p) and _is_rank(p)]
    assert not left, left
    assert not glob.glob(os.path.join(tmp_dir, "torchport-dist-*"))


def _is_rank(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ")
    except OSError:
        return False
    return b"dist_rank" in cmd or b"torch.distributed.run" in cmd


def test_an_empty_tensor_hang_is_a_named_timeout_and_truncated_avg_passes(tmp_dir):
    """simccl's last rank never completes a collective of an empty tensor: a ``timeout``
    that names it, at the collective's own deadline (8 s here), long before the world's; the
    int64 rows before it, AVG included (simccl truncates, as NCCL), passed."""
    spec = DistSpec(
        kind="collectives",
        sizes=(7, 0),
        dtypes=("int64",),
        fault="empty_hang",
        backend="simccl",
        collective_deadline_s=8.0,
    )
    result, took = _run(DistCase("planted/x", spec), timeout_s=120)
    assert result["status"] == "timeout", result["error"]
    message = result["error"]["message"]
    assert re.match(
        r"all_reduce\(sum\) int64 n=0 contiguous did not complete within its own 8 s "
        r"deadline on rank\(s\) ",
        message,
    ), message
    assert took < 108 - 8  # the world's own deadline: 108 s
    rows = {(r["collective"], r["op"], r["size"]): r for r in result["findings"]["dist_rows"]}
    avg = rows[("all_reduce", "avg", 7)]
    assert avg["status"] == "pass" and "truncation toward zero" in avg["note"]
    _nothing_left(tmp_dir)


def test_a_group_that_moves_no_data_fails_before_any_row(tmp_dir):
    case = next(c for c in planted_dist_cases() if c.id == "planted/dist_no_data")
    result, _ = _run(case, timeout_s=60)
    assert result["status"] == "accuracy_fail", result["error"]
    assert result["error"]["type"] == "CollectiveMovedNoData"
    message = result["error"]["message"]
    assert "the simccl process group returned success and moved no data" in message
    assert "all_gather_into_tensor left this rank's tensor as it was" in message
    assert "dist_rows" not in result["findings"]  # no conformance row was judged
    _nothing_left(tmp_dir)


@pytest.mark.slow
def test_a_node_missing_is_a_timeout_naming_the_rendezvous(tmp_dir):
    """``--nnodes 2 --rdzv-endpoint`` on one machine only: torchrun's rendezvous gives up at
    its join limit inside the deadline, in its own words, and no rank ever reports."""
    port = free_port()
    case = DistCase(
        "dist/collectives", DistSpec(kind="collectives", sizes=(1,), dtypes=("float32",))
    )
    result, took = _run(case, timeout_s=60, nnodes=2, rdzv_endpoint=f"127.0.0.1:{port}")
    assert result["status"] == "timeout", result["error"]
    message = result["error"]["message"]
    assert f"the rendezvous (c10d at 127.0.0.1:{port}" in message and "never completed" in message
    assert "1 rank(s) of this node never started" in message
    assert "torchrun (node 0): exit code 1" in message and "RendezvousTimeoutError" in message
    assert took < 60
    assert result["metrics"]["ranks_reported"] == 0
    _nothing_left(tmp_dir)


@pytest.mark.slow
def test_two_machines_each_record_every_rank_of_the_world(tmp_dir):
    """Two runs joining one rendezvous endpoint, as two machines would (here both on this one):
    each records its own rank, and through the world's store every rank's end."""
    import threading

    port = free_port()
    spec = DistSpec(kind="collectives", sizes=(1, 7), dtypes=("float32",))
    results: list = []

    def node():
        results.append(
            _run(
                DistCase("dist/collectives", spec),
                timeout_s=180,
                nnodes=2,
                rdzv_endpoint=f"127.0.0.1:{port}",
            )[0]
        )

    threads = [threading.Thread(target=node) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert len(results) == 2
    for result in results:
        assert result["status"] == "pass", result["error"]
        assert [r["rank"] for r in result["findings"]["dist"]["ranks"]] in ([0], [1])
        assert sorted(result["findings"]["dist"]["world_reports"]) == ["0", "1"]
    _nothing_left(tmp_dir)


@pytest.mark.slow
def test_a_held_rendezvous_port_is_a_timeout_within_the_deadline(tmp_dir):
    """A program holds the rendezvous port (listens, never answers): torchrun waits on it;
    the world's deadline ends everything, naming the rendezvous."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(16)
        port = held.getsockname()[1]
        spec = DistSpec(kind="collectives", sizes=(1,), dtypes=("float32",))
        result, took = _run(
            DistCase("dist/collectives", spec), timeout_s=20, rdzv_endpoint=f"127.0.0.1:{port}"
        )
    assert result["status"] == "timeout", result["error"]
    message = result["error"]["message"]
    assert re.search(r"ran past its [\d.]+ s deadline", message), message
    assert "2 rank(s) of this node never started" in message
    assert f"the rendezvous (c10d at 127.0.0.1:{port}" in message
    assert "torchrun (node 0):" in message
    assert took < 20 + 5
    _nothing_left(tmp_dir)


@pytest.mark.slow
def test_a_sigterm_of_the_run_leaves_no_rank_and_no_folder(tmp_dir):
    env = {**os.environ, "TMPDIR": str(tmp_dir)}
    proc = subprocess.Popen(
        [
            TORCHPORT,
            "run",
            "--suite",
            "planted",
            "--cases",
            "planted/dist_hang",
            "--probes",
            "none",
            "--timeout",
            "120",
            "--db",
            str(tmp_dir / "kb.db"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        end = time.monotonic() + 90
        while not glob.glob(os.path.join(tmp_dir, "torchport-dist-*", "rank1.last")):
            assert time.monotonic() < end and proc.poll() is None, proc.stdout.read()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not glob.glob(os.path.join(tmp_dir, "torchport-dist-*"))
    left = [p for p in _all_pids() if _is_rank(p) and _env_has(p, str(tmp_dir))]
    assert not left, left


def _all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _env_has(pid: int, text: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return text.encode() in f.read()
    except OSError:
        return False


@pytest.mark.slow
def test_a_device_without_a_collective_backend_is_refused_by_name(tmp_dir):
    """quirkdev, a PrivateUse1 backend with no process group: every dist case is ``skip``
    with "no collective backend for quirkdev", and no rank starts."""
    env = {
        **os.environ,
        "TMPDIR": str(tmp_dir),
        "TORCHPORT_PRIVATEUSE1_MODULE": "torchport.devices.quirkdev",
    }
    done = subprocess.run(
        [
            TORCHPORT,
            "run",
            "--suite",
            "dist",
            "--device",
            "quirkdev",
            "--cases",
            "dist/collectives,dist/ddp/mlp",
            "--modes",
            "eager",
            "--probes",
            "none",
            "--db",
            str(tmp_dir / "kb.db"),
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    import json

    results = json.loads(done.stdout)["results"]
    assert {r["case"] for r in results} == {"dist/collectives", "dist/ddp/mlp"}
    for r in results:
        assert r["status"] == "skip"
        assert r["error"]["message"].startswith("no collective backend for quirkdev")
    assert not glob.glob(os.path.join(tmp_dir, "torchport-dist-*"))
