"""The knowledge base through its Store protocol: migrations, one-by-one commits, queries,
search, read-only opens, threads, and no torch import."""

import hashlib
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from torchport.kb import DuplicateResult, RunInProgress, Store, StoreError, open_store
from torchport.kb.sql_common import STALE_AFTER_S
from torchport.kb.sqlite_schema import SCHEMA_VERSION, migrations, statements
from torchport.kb.sqlite_store import SQLiteStore as SQLiteStoreType
from torchport.records import MalformedResult
from torchport.records.result import Result


def _result(case, mode="eager", status="pass", **extra):
    return {"case": case, "mode": mode, "status": status, **extra}


def _run(store, run_id="r1", command="torchport run", **extra):
    store.create_run(
        run_id=run_id,
        command=command,
        suite="smoke",
        device="cpu",
        config={"modes": ["eager"]},
        plan=[["a", "eager"]],
        labels={"k": "v"},
        **extra,
    )


def _digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def store(kb_url):
    """A knowledge base with run r1, on each engine (SQLite, PostgreSQL)."""
    s = open_store(kb_url, write=True)
    _run(s)
    yield s
    s.close()


def test_store_satisfies_the_protocol_and_is_migrated_to_the_latest(store):
    assert isinstance(store, Store)
    assert store.schema_version() == SCHEMA_VERSION >= 2


def test_results_round_trip_and_filters(store):
    store.add_results(
        "r1",
        [
            _result(
                "hf/llama", metrics={"parity_cosine": 1.0}, probe_versions={"compile": 2, "perf": 1}
            )
        ],
    )
    store.add_results(
        "r1",
        [
            Result(
                case="hf/gpt2",
                mode="eager",
                status="eager_fail",
                stage="run",
                error={
                    "type": "RuntimeError",
                    "message": "shape mismatch",
                    "traceback": "Traceback: in gpt2_attention",
                },
            )
        ],
    )
    assert [r["case"] for r in store.results(run_id="r1")] == ["hf/llama", "hf/gpt2"]
    assert store.results(status="eager_fail")[0]["error"]["message"] == "shape mismatch"
    assert [r["case"] for r in store.results(case_glob="hf/l*")] == ["hf/llama"]
    llama = store.results(run_id="r1")[0]
    assert llama["metrics"] == {"parity_cosine": 1.0}
    assert llama["probe_versions"] == {"compile": 2, "perf": 1}
    assert store.results(status="eager_fail")[0]["probe_versions"] == {}


@pytest.mark.parametrize(
    "bad",
    [
        _result("x", status="kinda"),
        _result("x", grade="somewhere"),
        _result("x", metrics={"step_ms": "fast"}),
        {"mode": "eager", "status": "pass"},
        _result("x", findings={"ops": [{"op": "aten.mm"}]}),  # no device, no count
        _result("x", findings={1: "a", "b": 2}),  # keys JSON cannot sort
    ],
)
def test_a_malformed_result_is_refused_before_anything_is_written(store, bad):
    with pytest.raises(MalformedResult):
        store.add_results("r1", [bad])
    assert store.results() == []


def test_full_text_search(store):
    store.add_results(
        "r1",
        [
            _result(
                "hf/gpt2",
                status="eager_fail",
                error={
                    "type": "E",
                    "message": "shape mismatch in attention",
                    "traceback": "File modeling_gpt2.py",
                },
            )
        ],
    )
    store.add_results("r1", [_result("hf/llama")])
    assert [r["case"] for r in store.search("attention")] == ["hf/gpt2"]
    assert [r["case"] for r in store.search("llama")] == ["hf/llama"]
    assert store.search('"unbalanced') == []  # user text cannot break the FTS syntax
    assert store.search("NEAR( OR AND *") == []


def test_fallback_op_query_is_an_exact_prefix_not_a_pattern(store):
    store.add_results(
        "r1",
        [
            _result(
                "a",
                findings={
                    "ops": [
                        {
                            "op": "aten.cumsum.default",
                            "device": "cpu",
                            "count": 3,
                            "fallback": True,
                        },
                        {
                            "op": "aten._index_put_impl_.default",
                            "device": "cpu",
                            "count": 1,
                            "fallback": True,
                        },
                        {
                            "op": "aten.mm.default",
                            "device": "simdev",
                            "count": 9,
                            "fallback": False,
                        },
                    ]
                },
            )
        ],
    )
    store.add_results("r1", [_result("b")])
    assert [r["case"] for r in store.results(fallback_op="aten.cumsum")] == ["a"]
    assert [r["case"] for r in store.results(fallback_op="aten::cumsum")] == ["a"]
    assert [r["case"] for r in store.results(fallback_op="aten._index_put_impl_")] == ["a"]
    assert store.results(fallback_op="aten.Xindex_put_impl_") == []  # '_' is no wildcard
    assert store.results(fallback_op="aten.cum") == []  # a name, not a prefix of one
    assert store.results(fallback_op="aten.mm") == []


def test_case_glob_reads_underscore_and_brackets_as_fnmatch_does(store):
    for case in ("hf/qwen3_moe", "hf/qwen3Xmoe", "hf/Llama"):
        store.add_results("r1", [_result(case)])
    assert [r["case"] for r in store.results(case_glob="hf/qwen3_moe")] == ["hf/qwen3_moe"]
    assert [r["case"] for r in store.results(case_glob="hf/[q]wen3?moe")] == [
        "hf/qwen3_moe",
        "hf/qwen3Xmoe",
    ]
    assert store.results(case_glob="hf/llama") == []  # case-sensitive


def test_same_item_twice_is_refused(store):
    store.add_results("r1", [_result("a")])
    with pytest.raises(DuplicateResult, match="already has a result"):
        store.add_results("r1", [_result("a")])
    assert len(store.results()) == 1


def test_unknown_run_names_the_latest(store):
    for plan in (True, False):
        with pytest.raises(StoreError, match="latest is r1"):
            store.get_run("zzz", plan=plan)


def test_a_run_without_its_plan_carries_the_plans_length(store):
    whole, lean = store.get_run("r1"), store.get_run("r1", plan=False)
    assert whole["plan"] == [["a", "eager"]] and "plan" not in lean and lean["planned"] == 1
    assert {k: v for k, v in whole.items() if k != "plan"} == {
        k: v for k, v in lean.items() if k != "planned"
    }


def test_environments_are_stored_once_and_every_distinct_one_is_kept(store):
    a = store._put_environment({"torch": "2.13"})
    assert store._put_environment({"torch": "2.13"}) == a
    store._set_environment("r1", a)
    store._set_environment("r1", a)
    b = store._put_environment({"torch": "2.14"})
    store._set_environment("r1", b)
    run = store.get_run("r1")
    assert run["environment_id"] == a and run["environment_ids"] == [a, b]
    assert store._environment(b) == {"torch": "2.14"}


def test_last_status_prefers_eager_then_the_newest(store):
    store.add_results("r1", [_result("a", mode="compile", status="compile_fail")])
    store.add_results("r1", [_result("a", status="pass")])
    store.add_results("r1", [_result("b", mode="compile", status="crash")])
    _run(store, "r2")
    store.add_results("r2", [_result("a", mode="compile", status="oom")])
    assert store.history() == {"a": "pass", "b": "crash"}
    assert store.history(device="cuda") == {}


_LIVE_RUN = """
import sys, time
from torchport.kb import open_store
s = open_store(sys.argv[1], write=True)
s.create_run(run_id="live", command="c", suite="smoke", device="cpu", config={}, plan=[],
             labels={})
print("ready", flush=True)
time.sleep(60)
"""


def test_resume_of_a_live_run_is_refused_naming_its_process(kb_url):
    path = kb_url
    child = subprocess.Popen(
        [sys.executable, "-c", _LIVE_RUN, path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        store = open_store(path, write=True)
        with pytest.raises(RunInProgress, match=f"process {child.pid}"):
            store.update_run("live", state="running")
        assert store.get_run("live")["state"] == "running"
    finally:
        child.kill()
        child.wait()
    assert store.get_run("live")["state"] == "interrupted"  # its supervisor died
    store.update_run("live", state="running")
    assert store.get_run("live")["pid"] == os.getpid()
    with pytest.raises(StoreError, match="no run 'nope'"):
        store.update_run("nope", state="running")


def test_read_only_store_refuses_writes_and_never_creates(tmp_path, store):
    store.add_results("r1", [_result("a")])
    reader = open_store(store.url, write=False)
    assert reader.read_only and [r["case"] for r in reader.results()] == ["a"]
    with pytest.raises(StoreError, match="opened read-only"):
        reader.add_results("r1", [_result("b")])
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no knowledge base"):
        open_store(str(missing), write=False)
    assert not missing.exists()


def test_a_write_store_creates_its_file_at_the_first_write(tmp_path):
    path = tmp_path / "new.db"
    store = open_store(str(path), write=True)
    assert not path.exists()  # bad input found after the open leaves nothing behind
    _run(store)
    assert path.exists() and store.get_run("r1")["labels"] == {"k": "v"}
    with pytest.raises(StoreError, match="does not exist"):
        open_store(str(tmp_path / "no" / "such" / "kb.db"), write=True)


def test_reads_from_many_threads_while_one_writes(store):
    errors, stop = [], threading.Event()

    def read():
        reader = open_store(store.url, write=False)
        try:
            while not stop.is_set():
                reader.results(run_id="r1")
                reader.runs()
        except Exception as exc:  # any lock or thread error fails the test
            errors.append(exc)

    shared = open_store(store.url, write=False)  # one store object shared by threads too

    def read_shared():
        try:
            for _ in range(50):
                shared.results(run_id="r1")
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(3)] + [
        threading.Thread(target=read_shared) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for i in range(40):
        store.add_results("r1", [_result(f"c{i}")])
    time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    assert errors == [] and len(shared.results()) == 40


def _v1_file(path):
    """A knowledge base as torchport wrote it at schema v1 (one run, one result)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for statement in statements(dict(migrations())[1]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO environments VALUES ('e1', '{\"torch\": \"2.12\"}', 't')")
    conn.execute(
        "INSERT INTO runs(id, started_at, state, command, suite, device, config, plan,"
        " labels, environment_id) VALUES ('old', 't', 'complete', 'c', 'smoke', 'cpu',"
        " '{}', '[[\"a\", \"eager\"]]', '{}', 'e1')"
    )
    conn.execute(
        "INSERT INTO results(run_id, case_id, case_version, mode, status, finished_at)"
        " VALUES ('old', 'a', 1, 'eager', 'pass', 't')"
    )
    conn.close()


def test_an_older_schema_is_refused_by_reads_and_upgraded_by_a_write(tmp_path):
    path = str(tmp_path / "v1.db")
    _v1_file(path)
    before = _digest(path)
    with pytest.raises(StoreError, match=r"schema v1, older .* 'torchport migrate --db "):
        open_store(path, write=False)
    assert _digest(path) == before
    writer = open_store(path, write=True)
    assert writer.schema_version() == SCHEMA_VERSION
    assert writer.get_run("old")["environment_ids"] == ["e1"]  # backfilled
    assert writer.get_run("old", plan=False)["planned"] == 1  # the v6 column, backfilled
    assert writer.results()[0]["case"] == "a"


def test_records_and_views_never_import_torch():
    code = (
        "import sys, torchport.records, torchport.views as v, torchport.interfaces.render, "
        "torchport.interfaces.cli.show_cmd, torchport.interfaces.cli.runs_cmd, "
        "torchport.interfaces.cli.results_cmd, torchport.interfaces.cli.search_cmd; "
        "v.build_views({'plan': []}, []); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def _execute(store, sql, args):
    """Raw SQL written for both engines (``?`` parameters) on either engine (to stand in for
    another host)."""
    if not isinstance(store, SQLiteStoreType):
        from torchport.records.dialect import POSTGRES

        sql = POSTGRES.bind(sql)
    store._writer().execute(sql, args)


def _another_host_runs(store, run_id, heartbeat_age_s):
    beat = datetime.now(timezone.utc) - timedelta(seconds=heartbeat_age_s)
    _execute(
        store,
        "UPDATE runs SET host = ?, pid = ?, heartbeat_at = ?, state = 'running' WHERE id = ?",
        ("lab-host-7", 4242, beat.isoformat(timespec="seconds"), run_id),
    )


def test_a_run_from_another_host_is_live_while_its_heartbeat_is_fresh(store):
    store._stop_heartbeat()  # r1 stands for another host's run from here on
    _another_host_runs(store, "r1", heartbeat_age_s=5)
    with pytest.raises(RunInProgress, match="process 4242 on lab-host-7"):
        store.update_run("r1", state="running")
    assert store.get_run("r1")["state"] == "running"
    assert [r["state"] for r in store.runs()] == ["running"]
    _another_host_runs(store, "r1", heartbeat_age_s=STALE_AFTER_S + 30)
    assert store.get_run("r1")["state"] == "interrupted"  # its supervisor stopped beating
    store.update_run("r1", state="running")
    run = store.get_run("r1")
    assert (run["host"], run["pid"], run["state"]) == (socket.gethostname(), os.getpid(), "running")


def test_the_supervisor_beats_until_its_run_finishes(store, monkeypatch):
    from torchport.kb import sql_store

    monkeypatch.setattr(sql_store, "HEARTBEAT_S", 0.05)
    _run(store, "r2")  # its heartbeat thread starts with the run
    _execute(store, "UPDATE runs SET heartbeat_at = ? WHERE id = ?", ("2000-01-01T00:00:00", "r2"))
    deadline = time.time() + 10
    while store.get_run("r2")["heartbeat_at"].startswith("2000") and time.time() < deadline:
        time.sleep(0.05)
    assert not store.get_run("r2")["heartbeat_at"].startswith("2000")
    store.update_run("r2", state="complete")
    assert store._heartbeat is None
    _execute(store, "UPDATE runs SET heartbeat_at = ? WHERE id = ?", ("2000-01-01T00:00:00", "r2"))
    time.sleep(0.3)
    assert store.get_run("r2")["heartbeat_at"].startswith("2000")  # no beat after the end


def test_a_recorded_command_line_keeps_no_password(store):
    _run(store, "r3", command="torchport run --db postgresql://ana:hunter2@db.lab:5432/kb")
    assert store.get_run("r3")["command"] == "torchport run --db postgresql://ana@db.lab:5432/kb"
