"""The read commands on a knowledge base written through the store API: what ``show`` prints,
what ``--json`` carries (numbers as numbers), queries, and that reading changes nothing."""

import hashlib
import json

import pytest

from tests import kb
from tests.conftest import torchport


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory):
    return kb.build(tmp_path_factory.mktemp("read") / "kb.db")


def _digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_show_leads_with_the_verdict_and_keeps_details_for_detail(sample_db, tmp_path):
    out = torchport("show", "--db", sample_db, cwd=tmp_path).stdout
    assert out.index("\nVerdict") < out.index("\nResults") < out.index("\nPlacement")
    for question in ("runs?", "matches?", "on the device?", "wait before the first", "how fast?"):
        assert question in out
    assert "4 / 6 results ran; 2 stopped with an error; 2 skipped" in out
    assert "\nPerformance" not in out and "\nCompile economics" not in out
    assert "more with --detail: coverage, compile, perf, train, profile" in out
    shown = json.loads(torchport("show", "--db", sample_db, "--json", cwd=tmp_path).stdout)
    assert shown["headline"]["host_results"] == 2
    assert [r[0] for r in shown["verdict"]["rows"]][-1] == "how fast?"


def test_show_prints_every_view_with_its_notes(sample_db, tmp_path):
    before = _digest(sample_db)
    out = torchport("show", "--detail", "--db", sample_db, cwd=tmp_path).stdout
    for title in (
        "Status counts",
        "Results",
        "Coverage by stage",
        "Placement (calls per step)",
        "Compile economics",
        "Performance",
        "Training-loss parity",
        "Profile",
    ):
        assert f"\n{title}" in out
    for shown in (
        "run r1  complete  suite smoke  device cpu  dtype float32  labels team=core",
        "pass [fallback] (46.8 ms/step)",
        "eager_fail @run (Could not run",
        "'jax' backend.)",
        "> 3 s (compile_timeout)",
        "1.00 s (3 hits)",
        "5 (3+5+7+1+...)",
        "0.0021% (6NT)",
        "1.66x",
        "463.2 MiB",
        "cumsum x2, flip x2, all x1 (+1 more)",
        "1: h2d 1.0 KiB",
        "3 / 4 (75.0%)",
        "no step time for hf/gpt2 [eager]: eager step failed",
        "smoke/mlp [eager]: a train note",
        "8 / 8 planned results recorded",
    ):
        assert shown in out, shown
    assert _digest(sample_db) == before


def test_show_json_values_are_typed(sample_db, tmp_path):
    shown = json.loads(torchport("show", "--db", sample_db, "--json", cwd=tmp_path).stdout)
    perf = shown["views"]["perf"]
    names = [c["name"] for c in perf["columns"]]
    row = dict(zip(names, perf["rows"][0], strict=True))
    assert row["median ms"] == 2.71 and row["n"] == 31 and row["CV"] == 0.102
    assert row["p10-p90 ms"] == {"low": 2.5, "high": 3.25} and row["MFU"] == "no peak"
    matrix = shown["views"]["matrix"]["rows"][0]
    assert matrix[1] == {
        "status": "pass",
        "grade": "on_device",
        "stage": None,
        "step_ms": 2.71,
        "max_rel_err": 1.2e-06,
        "error": None,
    }
    assert shown["views"]["coverage"]["rows"][0][2] == {"n": 3, "of": 4}
    assert shown["results"][1]["probe_versions"] == {"perf": 1, "compile": 2, "placement": 1}
    assert shown["environment"]["torch"] == "2.13.0" and len(shown["environments"]) == 1


def test_results_queries(sample_db, tmp_path):
    def query(*args):
        proc = torchport("results", *args, "--db", sample_db, "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return [(r["case"], r["mode"]) for r in json.loads(proc.stdout)]

    assert query("--fallback-op", "aten._index_put_impl_") == [("smoke/mlp", "compile")]
    assert query("--fallback-op", "aten::cumsum") == [("smoke/mlp", "compile")]
    assert query("--status", "skip", "--case", "hf/skip*") == [
        ("hf/skipme", "eager"),
        ("hf/skipme", "compile"),
    ]
    text = torchport("results", "--status", "eager_fail", "--db", sample_db, cwd=tmp_path)
    assert (
        "Could not run 'aten::empty_strided' with arguments from the 'jax' backend." in text.stdout
    )


def test_cases_with_an_explicit_db_must_find_it(tmp_path):
    proc = torchport("cases", "smoke", "--db", tmp_path / "missing.db", cwd=tmp_path)
    assert proc.returncode == 2 and "no knowledge base" in proc.stderr
    assert not (tmp_path / "missing.db").exists()
