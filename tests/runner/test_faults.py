"""Planted faulty cases each get the right status, and the sweep goes on after each."""

import pytest


@pytest.fixture(scope="module")
def planted(planted_runs):
    hung, out = planted_runs["hang"], dict(planted_runs["faults"])
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
