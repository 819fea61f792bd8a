"""The dist views: collectives rows with their bus bandwidth, bandwidth, training parity."""

from __future__ import annotations

import json

import pytest

from tests import kb
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


def _collectives(status_7, busbw):
    rows = [
        {"collective": "all_reduce", "op": "sum", "dtype": "float32", "size": n, "ranks": []}
        for n in (1, 7)
    ]
    rows[0].update(layout="contiguous", status="pass")
    rows[1].update(layout="contiguous", status=status_7)
    bandwidth = [
        {"collective": "all_reduce", "size": 1024, "busbw_gbps": busbw, "algbw_gbps": busbw}
    ]
    return {"dist_rows": rows, "dist_bandwidth": bandwidth}


def _train(rel_err, status="pass", mode="eager"):
    findings = {
        "dist_train": {"worst": {"name": "lm.w", "step": 1, "rel_err": rel_err}, "step_s": 0.02}
    }
    return _result("dist/tp/llama", findings, status=status, mode=mode)


def test_compare_lists_dist_status_bandwidth_and_training_changes():
    from torchport.views.compare_dist import dist_changes, dist_views

    a = [_result("dist/collectives", _collectives("pass", 2.0)), _train(1e-9)]
    b = [
        _result("dist/collectives", _collectives("fail", 1.0), status="accuracy_fail"),
        _train(0.5, status="accuracy_fail"),
        _result("dist/fsdp2/llama", {}, status="timeout"),  # only in B, no training record
    ]
    changes = dist_changes(a, b)
    assert [(c["size"], c["a"], c["b"]) for c in changes["collectives"]] == [(7, "pass", "fail")]
    assert changes["bandwidth"][0]["ratio"] == pytest.approx(0.5)
    assert changes["bandwidth"][0]["changed"]
    by_case = {t["case"]: t for t in changes["training"]}
    assert by_case["dist/tp/llama"]["b"]["rel_err"] == 0.5
    assert by_case["dist/tp/llama"]["a"]["status"] == "pass"
    assert by_case["dist/fsdp2/llama"]["a"] is None
    assert by_case["dist/fsdp2/llama"]["b"]["status"] == "timeout"
    titles = [v.title for v in dist_views(changes)]
    assert titles == [
        "Distributed collectives: status changed (1)",
        "Distributed bus bandwidth",
        "Distributed training parity",
    ]
    assert dist_changes(a, a)["collectives"] == []  # nothing changed: no status rows


def test_compare_runs_reads_the_dist_results_from_the_store(kb_url):
    from torchport.kb import open_store
    from torchport.views.compare import compare_runs
    from torchport.views.compare_tables import comparison_views

    sides = {
        "A": [_result("dist/collectives", _collectives("pass", 2.0)), _train(1e-9)],
        "B": [_result("dist/collectives", _collectives("fail", 2.1), "accuracy_fail"), _train(1)],
    }
    with open_store(kb_url, write=True) as store:
        for run_id, results in sides.items():
            kb.add_run(store, run_id, results, suite="dist")
    with open_store(kb_url, write=False) as store:
        cmp = compare_runs(store, "A", "B")
    assert [c["b"] for c in cmp.dist["collectives"]] == ["fail"]
    assert not cmp.dist["bandwidth"][0]["changed"]  # 5 % is inside the band
    assert cmp.dist["training"][0]["b"]["rel_err"] == 1
    assert "Distributed training parity" in [v.title for v in comparison_views(cmp)]
    assert json.loads(json.dumps(cmp.to_dict()))["dist"] == cmp.dist
