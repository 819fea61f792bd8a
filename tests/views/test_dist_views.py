"""The dist views: collectives rows with their bus bandwidth, bandwidth, training parity."""

from __future__ import annotations

import json

import pytest

from tests.conftest import torchport
from torchport.views import dist


def _result(case, findings, status="pass", mode="eager"):
    base = {"ladder": "dist", "dist": {"world_size": 2, "backend": "gloo", "launcher": "procs"}}
    return {"case": case, "mode": mode, "status": status, "findings": {**base, **findings}}


def test_collective_rows_carry_status_reason_and_staging():
    rows = [
        {"collective": "all_reduce", "op": "sum", "dtype": "float32", "size": 7},
        {"collective": "all_reduce", "op": "avg", "dtype": "int64", "size": 7},
    ]
    rows[0].update(layout="contiguous", status="fail", ranks=[1], max_abs_err=0.5)
    rows[1].update(layout="contiguous", status="skip", reason="the backend refused it: X")
    staging = {"staged": ["all_reduce"], "checked": ["all_reduce", "broadcast"]}
    view = dist.build(
        {}, [_result("dist/collectives", {"dist_rows": rows, "dist_host_staging": staging})]
    )
    assert view is not None
    assert [r[6] for r in view.rows] == ["fail", "skip"]
    assert view.rows[0][9] == "ranks [1]" and view.rows[1][9] == "the backend refused it: X"
    assert any("staged through host memory" in n and "all_reduce" in n for n in view.notes)
    assert dist.build({}, [{"case": "smoke/mlp", "mode": "eager", "findings": {}}]) is None


def test_bandwidth_and_training_tables():
    bw = {"collective": "all_reduce", "size": 1024, "bytes": 4096, "time_s": 0.002}
    bw.update(spread=0.1, samples=7, algbw_gbps=2.0, busbw_gbps=2.0)
    train = {"model": "mlp", "steps": 3, "worst": {"name": "up.weight", "step": 2, "rel_err": 1e-7}}
    train.update(step_s=0.01, peak_bytes_per_rank=[10, 11])
    results = [
        _result("dist/bandwidth", {"dist_bandwidth": [bw]}),
        _result("dist/ddp/mlp", {"dist_train": train}, mode="compile"),
    ]
    results[1]["findings"]["dist"]["strategy"] = "ddp"
    (row,) = dist.bandwidth({}, results).rows
    assert row[4] == pytest.approx(2.0) and row[8] == 2.0  # ms, busbw
    (row,) = dist.training({}, results).rows
    assert row[2] == "ddp" and row[6] == "up.weight @ step 2" and row[8] == pytest.approx(10.0)


@pytest.mark.slow
def test_cli_runs_a_strategy_on_simdev_and_shows_its_table(tmp_path):
    db = tmp_path / "kb.db"
    run = torchport(
        "run",
        "--suite",
        "dist",
        "--cases",
        "dist/ddp/mlp",
        "--modes",
        "eager",
        "--device",
        "simdev",
        "--world-size",
        "2",
        "--db",
        db,
    )
    assert run.returncode == 0, run.stderr
    shown = torchport("show", "--db", db, "--json")
    views = json.loads(shown.stdout)["views"]
    (row,) = views["dist_training"]["rows"]
    assert row[2] == "ddp" and row[5] == "pass"
