"""The knowledge base: migrations, one-by-one commits, queries, search, and no torch import."""

import subprocess
import sys

import pytest

from torchport.records import StoreError, open_store
from torchport.records.store import SCHEMA_VERSION


def _result(case, mode="eager", status="pass", **extra):
    return {"case": case, "mode": mode, "status": status, **extra}


@pytest.fixture
def store(tmp_path):
    s = open_store(str(tmp_path / "kb.db"))
    s.create_run(run_id="r1", command="torchport run", suite="smoke", device="cpu",
                 config={"modes": ["eager"]}, plan=[["a", "eager"]], labels={"k": "v"})
    return s


def test_schema_is_migrated_to_the_latest(store):
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_results_round_trip_and_filters(store):
    store.add_result("r1", _result("hf/llama", metrics={"parity_cosine": 1.0}))
    store.add_result("r1", _result("hf/gpt2", status="eager_fail", stage="run",
                                   error={"type": "RuntimeError", "message": "shape mismatch",
                                          "traceback": "Traceback: in gpt2_attention"}))
    assert [r["case"] for r in store.results(run_id="r1")] == ["hf/llama", "hf/gpt2"]
    assert store.results(status="eager_fail")[0]["error"]["message"] == "shape mismatch"
    assert [r["case"] for r in store.results(case_glob="hf/l*")] == ["hf/llama"]
    assert store.results(run_id="r1")[0]["metrics"] == {"parity_cosine": 1.0}


def test_unknown_status_is_refused(store):
    with pytest.raises(ValueError):
        store.add_result("r1", _result("x", status="kinda"))


def test_full_text_search(store):
    store.add_result("r1", _result("hf/gpt2", status="eager_fail",
                                   error={"type": "E", "message": "shape mismatch in attention",
                                          "traceback": "File modeling_gpt2.py"}))
    store.add_result("r1", _result("hf/llama"))
    assert [r["case"] for r in store.search("attention")] == ["hf/gpt2"]
    assert [r["case"] for r in store.search("llama")] == ["hf/llama"]
    assert store.search('"unbalanced') == []  # user text cannot break the FTS syntax


def test_fallback_op_query(store):
    store.add_result("r1", _result("a", findings={"ops": [
        {"op": "aten.cumsum.default", "device": "cpu", "count": 3, "fallback": True},
        {"op": "aten.mm.default", "device": "simdev", "count": 9, "fallback": False}]}))
    store.add_result("r1", _result("b"))
    assert [r["case"] for r in store.results(fallback_op="aten.cumsum")] == ["a"]
    assert store.results(fallback_op="aten.mm") == []


def test_same_item_twice_is_refused(store):
    store.add_result("r1", _result("a"))
    with pytest.raises(Exception):
        store.add_result("r1", _result("a"))
    assert len(store.results()) == 1


def test_unknown_run_names_the_latest(store):
    with pytest.raises(StoreError, match="latest is r1"):
        store.get_run("zzz")


def test_environment_stored_once(store):
    a = store.put_environment({"torch": "2.13"})
    b = store.put_environment({"torch": "2.13"})
    assert a == b
    assert store.conn.execute("SELECT COUNT(*) FROM environments").fetchone()[0] == 1


def test_records_and_views_never_import_torch():
    code = ("import sys, torchport.records, torchport.interfaces.views as v, "
            "torchport.interfaces.cli.show_cmd, torchport.interfaces.cli.runs_cmd; "
            "v.build_views({'plan': []}, []); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
