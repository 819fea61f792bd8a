"""Planted faulty cases each get the right status, and the sweep goes on after each."""

import json

import pytest


def _run(tmp, cases: str, timeout_s: str) -> dict:
    from tests.conftest import torchport

    proc = torchport(
        "run",
        "--suite",
        "planted",
        "--device",
        "cpu",
        "--timeout",
        timeout_s,
        "--cases",
        cases,
        "--probes",
        "none",
        "--db",
        tmp / "kb.db",
        "--json",
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    # The hang gets a short deadline; the rest one that a loaded machine's compiles fit in.
    hung = _run(tmp, "hang", "6")
    out = _run(tmp, "abort,segfault,compile_bomb,compile_wrong,oom", "240")
    results = hung["results"] + out["results"]
    out["state"] = "complete" if {hung["state"], out["state"]} == {"complete"} else "no"
    return {(r["case"].split("/")[1], r["mode"]): r for r in results}, out


def test_every_item_has_a_result(planted):
    results, out = planted
    assert out["state"] == "complete" and len(results) == 12


@pytest.mark.parametrize(
    "case,mode,status,stage",
    [
        ("hang", "eager", "timeout", "run"),
        ("abort", "eager", "crash", "run"),
        ("segfault", "compile", "crash", "run"),
        ("compile_bomb", "eager", "pass", None),
        ("compile_bomb", "compile", "compile_fail", "compile"),
        ("compile_wrong", "eager", "pass", None),
        ("compile_wrong", "compile", "accuracy_fail", "parity"),
        ("oom", "eager", "oom", "run"),
    ],
)
def test_status_and_stage(planted, case, mode, status, stage):
    result = planted[0][(case, mode)]
    assert (result["status"], result["stage"]) == (status, stage), result["error"]


def test_crash_records_signal_and_worker_output(planted):
    result = planted[0][("abort", "eager")]
    assert "SIGABRT" in result["error"]["message"]
    assert result["findings"]["exit_code"] < 0
    segv = planted[0][("segfault", "eager")]
    assert "SIGSEGV" in segv["error"]["message"]


def test_timeout_names_the_limit(planted):
    assert "6 s limit" in planted[0][("hang", "compile")]["error"]["message"]
