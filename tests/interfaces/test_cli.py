"""The CLI end to end: --json shapes, queries, and every bad input (one line, exit 2)."""

import hashlib
import json
import sqlite3

import pytest

from tests.conftest import torchport


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One real run: smoke mlp + llama, both modes, ladder only. aot_eager: what these tests
    read does not depend on the backend, and Inductor's C++ build of llama's step took most of
    this fixture's 72 s (the CLI's default backend is run by test_faults and test_compile)."""
    tmp = tmp_path_factory.mktemp("cli")
    db = tmp / "kb.db"
    proc = torchport(
        "run",
        "--suite",
        "smoke",
        "--cases",
        "mlp,llama",
        "--device",
        "cpu",
        "--probes",
        "none",
        "--compile-backend",
        "aot_eager",
        "--label",
        "team=core",
        "--db",
        db,
        "--json",
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return db, json.loads(proc.stdout)


def test_run_json_shape(recorded):
    _, out = recorded
    assert out["state"] == "complete"
    assert {(r["case"], r["mode"]) for r in out["results"]} == {
        ("smoke/mlp", "eager"),
        ("smoke/mlp", "compile"),
        ("hf/llama", "eager"),
        ("hf/llama", "compile"),
    }
    for r in out["results"]:
        assert {"run_id", "case", "mode", "status", "stage", "metrics", "error"} <= set(r)
        assert r["status"] == "pass" and r["run_id"] == out["run_id"]
        assert r["metrics"]["parity_cosine"] > 0.9999


def test_results_filters_and_json(recorded):
    db, out = recorded
    every = json.loads(torchport("results", "--db", db, "--json").stdout)
    assert len(every) == 4
    llama = json.loads(torchport("results", "--db", db, "--case", "hf/*", "--json").stdout)
    assert {r["case"] for r in llama} == {"hf/llama"}
    none = json.loads(torchport("results", "--db", db, "--status", "crash", "--json").stdout)
    assert none == []


def test_search_finds_case_ids(recorded):
    db, _ = recorded
    found = json.loads(torchport("search", "--db", db, "llama", "--json").stdout)["results"]
    assert found and {r["case"] for r in found} == {"hf/llama"}
    assert "hf/llama" in torchport("search", "--db", db, "llama").stdout


def test_show_and_runs(recorded):
    db, out = recorded
    shown = json.loads(torchport("show", out["run_id"], "--db", db, "--json").stdout)
    assert shown["run"]["labels"] == {"team": "core"}
    env = shown["environment"]
    for key in ("torch", "torch_git", "transformers", "python", "os", "cpu", "torchport"):
        assert key in env
    assert "matrix" in shown["views"] and len(shown["results"]) == 4
    text = torchport("show", "--db", db).stdout
    assert "hf/llama" in text and "pass" in text
    runs = json.loads(torchport("runs", "--db", db, "--json").stdout)
    assert runs[0]["id"] == out["run_id"] and runs[0]["counts"] == {"pass": 4}


def test_suites_cases_doctor():
    assert "smoke" in torchport("suites").stdout
    cases = json.loads(torchport("cases", "smoke", "--json").stdout)
    assert [c["case"] for c in cases] == [
        "smoke/mlp",
        "smoke/convnet",
        "smoke/bnnet",
        "hf/llama",
        "hf/gpt2",
        "hf/qwen3_moe",
    ]
    doctor = json.loads(torchport("doctor", "--json").stdout)
    rows = {d["device"]: d for d in doctor["devices"]}
    assert rows["cpu"]["usable"] and not rows["cuda"]["usable"] and rows["cuda"]["detail"]


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "--suite", "nope"], "unknown suite 'nope'"),
        (["run", "--cases", "zzz*"], "no case matches"),
        (["run", "--device", "tpu9"], "unknown device 'tpu9'"),
        (["run", "--device", "cuda"], "device 'cuda' is not usable here"),
        (["run", "--modes", "eager,jit"], "unknown mode jit"),
        (["run", "--dtype", "float8"], "unknown dtype"),
        (["run", "--workload", "no_such_module:f"], "cannot import 'no_such_module'"),
        (["run", "--workload", "badworkload:factory"], "factory returned int"),
        (["run", "--resume", "nope"], "no run 'nope'"),
        (["show", "nope"], "no run 'nope'"),
        (["results", "--run", "nope"], "no run 'nope'"),
        (["results", "--status", "weird"], "unknown status 'weird'"),
        (["run", "--probes", "magic"], "unknown probe 'magic'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(recorded, tmp_path, args, needle):
    db, _ = recorded
    (tmp_path / "badworkload.py").write_text("def factory():\n    return 42\n")
    before = _digest(db)
    proc = torchport(*args, "--db", db, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert _digest(db) == before


def test_unreadable_and_newer_databases(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    proc = torchport("runs", "--db", junk)
    assert proc.returncode == 2 and "is not an SQLite database" in proc.stderr
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 999")
    before = _digest(newer)
    for args in (["runs"], ["run", "--cases", "mlp"]):
        proc = torchport(*args, "--db", newer)
        assert proc.returncode == 2 and "newer than this torchport" in proc.stderr
    assert _digest(newer) == before


def test_read_commands_do_not_create_a_database(tmp_path):
    missing = tmp_path / "missing.db"
    proc = torchport("runs", "--db", missing)
    assert proc.returncode == 2 and "no knowledge base" in proc.stderr
    assert not missing.exists()


def test_run_help_names_every_registered_probe():
    """The --probes help is made from the probe registry, so it cannot go stale."""
    from torchport.probes.registry import probe_names

    proc = torchport("run", "--help")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    listed = text.split("comma-separated: ", 1)[1].split(" (default", 1)[0]
    assert listed.split(", ") == probe_names()
