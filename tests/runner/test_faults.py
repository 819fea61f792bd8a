"""Planted faulty cases each get the right status, and the sweep goes on after each."""

import json
import subprocess

import pytest


def _start(tmp, cases: str, timeout_s: str, db: str) -> subprocess.Popen:
    """``torchport run`` of planted ``cases`` on the CPU, both modes, started, not waited for."""
    from tests.conftest import TORCHPORT

    args = ["run", "--suite", "planted", "--device", "cpu", "--timeout", timeout_s, "--cases"]
    args += [cases, "--probes", "none", "--db", str(tmp / db), "--json"]
    return subprocess.Popen(
        [TORCHPORT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp
    )


def _finish(proc: subprocess.Popen) -> dict:
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(stdout)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    # The hang gets a short deadline; the rest one that a loaded machine's compiles fit in. The
    # two runs go side by side (the hang's run mostly waits out its deadline), each with its
    # own knowledge base.
    hanging = _start(tmp, "hang", "6", "hang.db")
    rest = _start(tmp, "abort,segfault,compile_bomb,compile_wrong,oom", "240", "kb.db")
    hung, out = _finish(hanging), _finish(rest)
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
