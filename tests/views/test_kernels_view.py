"""The kernels views: one row per kernel, and fast_p counted only over correct, clearly faster
kernels."""

import math

from torchport.views import kernels


def result(case, status, verdict, speedup, mode="eager"):
    return {
        "case": case,
        "mode": mode,
        "status": status,
        "metrics": {} if speedup is None else {"kernel_step_speedup": speedup},
        "findings": {"ladder": "kernel", "kernel": {"verdict": verdict, "reason": "r"}},
        "error": None,
    }


RESULTS = [
    result("kernels/a", "pass", "correct_faster", 2.0),
    result("kernels/b", "pass", "correct_faster", 1.5),
    result("kernels/c", "pass", "correct_slower", 0.5),
    result("kernels/d", "pass", "correct_noisy_timing", 1.2),  # faster, but not clearly
    result("kernels/e", "accuracy_fail", "gradcheck_fail", None),
    {"case": "hf/llama", "mode": "eager", "status": "pass", "findings": {}, "metrics": {}},
]


def test_fast_p_counts_correct_and_clearly_faster():
    (row,) = kernels.fast_p(kernels.kernel_results(RESULTS))
    mode, tried, correct, faster, fast_p, geo_fast, geo_correct, noisy = row
    assert (mode, tried, correct, faster, noisy) == ("eager", 5, 4, 2, 1)
    assert fast_p == 2 / 5
    assert math.isclose(geo_fast, math.sqrt(3.0))
    assert math.isclose(geo_correct, (2.0 * 1.5 * 0.5 * 1.2) ** 0.25)


def test_views_only_for_runs_with_kernels():
    assert kernels.build({}, RESULTS[-1:]) is None
    assert kernels.summary({}, RESULTS[-1:]) is None
    view = kernels.build({}, RESULTS)
    assert [r["case"] for r in view.records()] == [f"kernels/{c}" for c in "abcde"]
    assert kernels.summary({}, RESULTS).rows[0][1] == 5


def test_modes_are_counted_apart():
    rows = kernels.fast_p(
        [result("k", "pass", "correct_faster", 2.0, mode=m) for m in ("eager", "compile")]
    )
    assert [r[0] for r in rows] == ["compile", "eager"]
    assert all(r[4] == 1.0 for r in rows)


def test_a_crashed_kernel_task_is_counted_as_tried():
    # what the supervisor records when the worker dies: no ladder, the task's tags
    crashed = {
        "case": "kernels/f",
        "mode": "eager",
        "status": "crash",
        "metrics": {},
        "findings": {"tags": ["kernel", "rms_norm"], "worker_log": "w.log"},
        "error": {"message": "worker died (signal SIGABRT)"},
    }
    other = {**crashed, "case": "hf/x", "findings": {"tags": ["dense"]}}
    chosen = kernels.kernel_results([*RESULTS, crashed, other])
    assert [r["case"] for r in chosen][-1] == "kernels/f"
    (row,) = kernels.fast_p(chosen)
    assert row[1:3] == [6, 4]  # tried 6 (the crash among them), correct 4
    view = kernels.build({}, [*RESULTS, crashed])
    assert view.records()[-1]["reason"] == "worker died (signal SIGABRT)"
