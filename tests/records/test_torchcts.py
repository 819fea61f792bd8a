"""TorchCTS's verdicts on the status ladder (records/torchcts.py, the table in
docs/suites/ops.md): each TorchCTS status and process outcome maps to one torchport status,
the tests of an OpInfo op at a dtype land in torchport's own case for it, and a case's result
is its worst test, with every test's words kept.

The tests here are made with the fields TorchCTS 0.4.1's conftest writes for a test (its
``status``, ``phase``, ``error_type``, ``subprocess``); the real report is read in
tests/store/test_torchcts_import.py."""

from __future__ import annotations

import pytest

from torchport.records.status import STATUSES
from torchport.records.torchcts import (
    FILTERED,
    CtsTest,
    case_of,
    result_of,
    results,
    short_id,
    verdict,
)

NODE = ".venv/lib/python3.11/site-packages/torchcts/opinfo/test_opinfo_forward.py"


def _test(status="PASS", **kw) -> CtsTest:
    fields = {"id": f"{NODE}::test_op_forward[clean-exp-torch.float32]", "suite": "opinfo"}
    fields.update(op="exp", dtype="torch.float32")
    fields.update(kw)
    return CtsTest(status=status, **fields)


@pytest.mark.parametrize(
    "test,status,stage",
    [
        (_test("PASS"), "pass", None),
        (_test("FAIL", error_type="AssertionError"), "accuracy_fail", "parity"),
        (_test("ERROR", error_type="RuntimeError", phase="call"), "eager_fail", "run"),
        (_test("ERROR", error_type="KeyError", phase="setup"), "build_fail", "build"),
        (_test("ERROR", error_type="OutOfMemoryError", phase="call"), "oom", "run"),
        (_test("ERROR", error_type="TimeoutError", timed_out=True), "timeout", "run"),
        (_test("ERROR", error_type="ProcessCrash", signal="SIGSEGV"), "crash", "run"),
        (_test("ERROR", error_type="SubprocessFailure", signal="SIGABRT"), "crash", "run"),
        (_test("ERROR", error_type="RuntimeError", phase="known_segfault"), "crash", "run"),
        (_test("SKIP", skip_reason="runtime_skip"), "skip", None),
        (_test(FILTERED, skip_reason="capability_not_declared"), "skip", None),
    ],
)
def test_each_torchcts_outcome_has_one_status(test, status, stage):
    got = verdict(test)
    assert (got.status, got.stage) == (status, stage)
    assert got.status in STATUSES


def test_a_message_that_names_a_crash_does_not_make_one():
    """Classified by fields, never by words: an ERROR whose text says segfault is the op's
    error unless the process died."""
    said = _test("ERROR", error_type="RuntimeError", error_message="Segmentation fault (core)")
    assert verdict(said).status == "eager_fail"


def test_an_opinfo_test_lands_in_torchports_op_case():
    assert case_of(_test()) == ("ops/exp/float32", "eager")
    masked = _test(op="masked.logsumexp", dtype="torch.int64")
    assert case_of(masked) == ("ops/masked.logsumexp/int64", "eager")


def test_any_other_test_is_a_case_of_its_own():
    handwritten = CtsTest(
        id=".venv/lib/python3.11/site-packages/torchcts/operators/test_conv.py::test_conv2d[0]",
        status="PASS",
        suite="operators",
        op="conv2d",
        dtype="torch.float32",
    )
    assert case_of(handwritten) == ("torchcts/operators/test_conv.py::test_conv2d[0]", "eager")
    compiled = CtsTest(
        id="torchcts/compiler/test_compile_ops.py::t[x]", status="PASS", suite="compiler"
    )
    assert case_of(compiled) == ("torchcts/compiler/test_compile_ops.py::t[x]", "compile")
    mine = CtsTest(id="tests/test_mine.py::test_it", status="PASS", suite="custom")
    assert case_of(mine) == ("torchcts/tests/test_mine.py::test_it", "eager")
    assert short_id("a/torchcts/b/torchcts/c.py::t[torchcts/x]") == "c.py::t[torchcts/x]"


def test_a_case_is_its_worst_test_with_every_test_kept():
    forward = _test(
        "FAIL", error_type="AssertionError", error_message="Tensor-likes are not close!"
    )
    backward = _test(
        "ERROR",
        id=f"{NODE.replace('forward', 'backward')}::test_op_backward[exp-torch.float32]",
        error_type="ProcessCrash",
        signal="SIGSEGV",
        error_message="Subprocess failed before writing a result record.",
    )
    nan = _test("PASS", id=f"{NODE}::test_op_forward[has_nan-exp-torch.float32]")
    (result,) = results([forward, nan, backward])
    assert result["status"] == "crash" and result["stage"] == "run"  # crash is worse
    assert result["error"]["type"] == "ProcessCrash"
    assert result["error"]["message"].startswith(
        "ERROR opinfo/test_opinfo_backward.py::test_op_backward[exp-torch.float32] (+1 more "
        "failed): Subprocess failed"
    )
    kept = result["findings"]["tests"]
    assert [t["torchcts_status"] for t in kept] == ["FAIL", "PASS", "ERROR"]
    assert [t["status"] for t in kept] == ["accuracy_fail", "pass", "crash"]
    assert kept[0]["message"] == "Tensor-likes are not close!" and kept[2]["signal"] == "SIGSEGV"
    assert result["grade"] is None and result["metrics"] == {}  # no placement, no figures


def test_a_case_that_ran_and_passed_beside_filtered_tests_passes():
    filtered = _test(FILTERED, skip_reason="capability_not_declared", detail="requires: training")
    (result,) = results([_test("PASS", finished_at="2026-12-07T15:50:00+00:00"), filtered])
    assert result["status"] == "pass" and result["error"] is None
    assert result["finished_at"] == "2026-12-07T15:50:00+00:00"
    assert result["findings"]["tests"][1]["skip_reason"] == "capability_not_declared"


def test_a_case_that_never_ran_is_a_skip_with_torchcts_reason():
    filtered = _test(FILTERED, skip_reason="capability_not_declared", detail="requires: training")
    result = result_of("ops/exp/float32", "eager", [filtered])
    assert result["status"] == "skip"
    assert result["findings"]["skip"] == "capability_not_declared"
    assert result["error"]["type"] == "Skip"
    assert result["error"]["message"] == (
        "TorchCTS filtered opinfo/test_opinfo_forward.py::test_op_forward[clean-exp-torch."
        "float32]: capability_not_declared: requires: training"
    )
    skipped = result_of("x", "eager", [_test("SKIP", skip_reason="cpu_contract_unsupported")])
    assert skipped["error"]["message"].startswith("TorchCTS skipped ")
