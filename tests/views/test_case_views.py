"""The views the web pages add: a case's history and parity per tensor, the ops most often on
the host, loss curves, one op across runs; and the store's counts per run behind the op page."""

import pytest

from tests import kb
from torchport.kb import open_store
from torchport.views.base import Fraction, Outcome, Span
from torchport.views.case_history import (
    exact_glob,
    history_view,
    latest_failure,
    parity_view,
)
from torchport.views.host_op import full_op_name, op_results_view, op_runs_view
from torchport.views.placement import host_op_ranking
from torchport.views.train import loss_curves

RUN = {"id": "r1", "plan": kb.PLAN, "config": kb.CONFIG}


def _stored(result: dict, run_id: str = "r1") -> dict:
    return {"run_id": run_id, "stage": None, "grade": None, "metrics": {}, **result}


def test_exact_glob_matches_only_the_case(tmp_path):
    path = kb.build(tmp_path / "kb.db")
    odd = {"case": "hf/odd[1]*?", "mode": "eager", "status": "pass"}
    kb.build(
        path, run_id="r2", results_=[odd, {"case": "hf/odd1x", "mode": "eager", "status": "pass"}]
    )
    with open_store(path, write=False) as store:
        found = store.results(case_glob=exact_glob("hf/odd[1]*?"))
        assert [r["case"] for r in found] == ["hf/odd[1]*?"]
        assert store.results(case_glob=exact_glob("smoke/mlp"), count=True) == 2


def test_history_rows_carry_run_device_labels_and_figures():
    results = [_stored(r) for r in kb.results() if r["case"] == "smoke/mlp"]
    runs = {"r1": {"started_at": "2026-01-01", "device": "cpu", "labels": {"team": "core"}}}
    view = history_view("smoke/mlp", results, runs)
    rows = view.records()
    assert [r["mode"] for r in rows] == ["eager", "compile"]
    eager = rows[0]
    assert eager["device"] == "cpu" and eager["labels"] == {"team": "core"}
    assert isinstance(eager["outcome"], Outcome) and eager["outcome"].status == "pass"
    assert eager["step ms"] == 2.71 and eager["p10-p90 ms"] == Span(2.5, 3.25)
    assert "2 results of smoke/mlp in 1 runs on cpu" in view.notes[0]


def test_parity_per_tensor_lists_the_failing_tensors_worst_first():
    result = _stored(
        {
            "case": "hf/gpt2",
            "mode": "compile",
            "status": "accuracy_fail",
            "metrics": {"parity_max_rel_err": 0.5, "parity_rmse_ratio": 40.0},
            "findings": {
                "parity": {
                    "basis": "device",
                    "dtype": "float32",
                    "tensors": 12,
                    "failing": 2,
                    "missing": [],
                    "worst": [
                        {
                            "name": "grad.wte",
                            "max_abs_err": 1.0,
                            "max_rel_err": 0.5,
                            "rmse": 0.2,
                            "allowed_rmse": 0.01,
                            "rmse_ratio": 40.0,
                            "excess": 20.0,
                        },
                        {
                            "name": "logits",
                            "max_abs_err": 0.1,
                            "max_rel_err": 0.05,
                            "rmse": 0.02,
                            "allowed_rmse": 0.01,
                            "rmse_ratio": 4.0,
                            "excess": 2.0,
                        },
                    ],
                }
            },
        }
    )
    view = parity_view(result)
    assert [r["tensor"] for r in view.records()] == ["grad.wte", "logits"]
    assert view.records()[0]["x allowed"] == 20.0
    assert "2 / 12 tensors outside tolerance" in view.notes[1]
    assert "max_rel_err 0.5" in view.notes[0]
    assert parity_view(_stored({"case": "c", "mode": "eager", "status": "skip"})) is None


def test_latest_failure_is_the_newest_with_an_error():
    results = [_stored(r) for r in kb.results()]
    assert latest_failure(results)["case"] == "hf/gpt2"  # skips are not failures
    assert latest_failure([r for r in results if r["status"] == "pass"]) is None


def test_host_op_ranking_counts_results_and_calls():
    view = host_op_ranking(RUN, kb.results())
    rows = {r["op"]: r for r in view.records()}
    assert rows["cumsum"]["results"] == 1 and rows["cumsum"]["calls per step"] == 2
    assert rows["cumsum"]["cases"] == "smoke/mlp [compile]"
    assert host_op_ranking(RUN, [r for r in kb.results() if r["case"] == "hf/llama"]) is None


def test_loss_curves_one_row_per_step_with_every_side():
    result = {
        "case": "smoke/mlp",
        "mode": "eager",
        "findings": {
            "train": {
                "device_losses": [2.0, 1.5, 1.2],
                "reference_losses": [2.0, 1.5, 1.1],
                "baseline_losses": [2.0, 1.5],
            }
        },
    }
    view = loss_curves(RUN, [result])
    assert view.rows == [
        ["smoke/mlp", "eager", 1, 2.0, 2.0, 2.0],
        ["smoke/mlp", "eager", 2, 1.5, 1.5, 1.5],
        ["smoke/mlp", "eager", 3, 1.2, 1.1, None],
    ]
    assert loss_curves(RUN, [{"case": "c", "mode": "eager", "findings": {}}]) is None


@pytest.mark.parametrize(
    ("given", "full"),
    [
        ("cumsum", "aten.cumsum"),
        ("aten::sort", "aten.sort"),
        ("aten.flip.default", "aten.flip.default"),
    ],
)
def test_full_op_name(given, full):
    assert full_op_name(given) == full


def test_op_views_and_counts_per_run(tmp_path):
    path = kb.build(tmp_path / "kb.db")
    kb.build(path, run_id="r2", labels={"release": "b"})
    with open_store(path, write=False) as store:
        by_run = store.results(fallback_op="aten.cumsum", by_run=True)
        assert by_run == {"r1": 1, "r2": 1}
        assert store.results(status="skip", by_run=True) == {"r1": 2, "r2": 2}
        assert store.results(case_glob="hf/[!l]*", by_run=True) == {"r1": 4, "r2": 4}
        # fnmatch's [^g] is the set {^, g}: counted in Python past the SQL superset
        assert store.results(case_glob="hf/[^g]*", by_run=True) == {"r1": 2, "r2": 2}
        runs = store.runs()
        view = op_runs_view("aten.cumsum", [(r, by_run.get(r["id"], 0)) for r in runs])
        assert {r["run"]: r["results"] for r in view.records()} == {
            "r1": Fraction(1, 8),
            "r2": Fraction(1, 8),
        }
        page = store.results(fallback_op="aten.cumsum")
        results = op_results_view("aten.cumsum", page, {r["id"]: r for r in runs}).records()
        assert results[0]["calls per step"] == {"cumsum": 2} and results[0]["device"] == "cpu"
