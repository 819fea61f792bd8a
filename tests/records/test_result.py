"""The closed status set, the classifier and the Result value."""

from __future__ import annotations

import math

import pytest

from torchport.records.result import (
    MalformedResult,
    Result,
    capture,
    classify,
    error_value,
    is_oom,
)
from torchport.timing import clock


def _raised(fn):
    try:
        fn()
    except Exception as exc:
        return exc
    raise AssertionError("did not raise")


def test_cpu_allocator_failure_is_oom():
    import torch

    exc = _raised(lambda: torch.empty(2**50, dtype=torch.uint8))
    assert type(exc) is RuntimeError and is_oom(exc)
    assert classify("run", exc) == "oom"


def test_torch_oom_and_memory_error_are_oom_at_any_stage():
    import torch

    assert classify("compile", torch.OutOfMemoryError("x")) == "oom"
    assert classify("place", MemoryError()) == "oom"


def test_stage_statuses_and_compile_split():
    import torch._dynamo.exc as dynamo_exc

    assert classify("build", ValueError()) == "build_fail"
    assert classify("reference", ValueError()) == "build_fail"
    assert classify("run", ValueError()) == "eager_fail"
    assert classify("compiled_run", ValueError()) == "compiled_run_fail"
    # Raised by the first compiled call: only the compiler's own errors are compile failures.
    assert classify("compile", dynamo_exc.Unsupported("no")) == "compile_fail"
    assert classify("compile", ValueError()) == "compiled_run_fail"
    assert classify("something_else", ValueError()) == "crash"


def test_plain_runtime_errors_are_not_oom():
    assert not is_oom(RuntimeError("shape mismatch: can't allocate memory later"))


def test_capture_returns_value_or_exception_with_duration():
    ok = capture("run", lambda: 3, clock)
    assert ok.ok and ok.value == 3 and ok.status == "pass" and ok.duration_s >= 0
    bad = capture("place", lambda: 1 / 0, clock)
    assert not bad.ok and bad.status == "place_fail"
    assert error_value(bad.exc)["type"] == "ZeroDivisionError"


def test_round_trip_and_validation():
    result = Result(
        case="c", mode="eager", metrics={"perf_median_ms": 2.0}, probe_versions={"perf": 1}
    )
    assert Result.from_dict(result.to_dict()) == result
    assert Result.from_dict({**result.to_dict(), "metrics": {"loss": math.nan}})
    for bad in (
        {"case": "c", "mode": "eager", "status": "fine"},
        {"case": "c", "mode": "eager", "metrics": {"x": "12 ms"}},
        {"case": "c", "mode": "eager", "grade": "sideways"},
        {"case": "c"},
        [1, 2],
    ):
        with pytest.raises(MalformedResult):
            Result.from_dict(bad)
