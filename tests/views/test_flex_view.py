"""The flex summary view on recorded results: the published figure's counts, per family."""

from torchport.views import build_views
from torchport.views import flex as view
from torchport.views.base import Annotated, Span

SKIP = "FlexAttention backward is not supported on cpu"


def result(
    case,
    mode,
    status,
    stage=None,
    compile_s=None,
    step_ms=None,
    sdpa_ms=None,
    mask_ms=None,
    message=None,
):
    metrics = {
        k: v
        for k, v in (
            ("perf_median_ms", step_ms),
            ("perf_sdpa_median_ms", sdpa_ms),
            ("flex_block_mask_build_ms", mask_ms),
        )
        if v is not None
    }
    return {
        "case": case,
        "mode": mode,
        "status": status,
        "stage": stage,
        "metrics": metrics,
        "durations": {"compile_s": compile_s, "run_s": 0.5} if compile_s else {"run_s": 0.5},
        "error": {"message": message} if message else None,
        "findings": {},
    }


RESULTS = [
    result(
        "flex/causal/s1/fwd",
        "compile",
        "pass",
        compile_s=3.0,
        step_ms=2.0,
        sdpa_ms=1.0,
        mask_ms=0.4,
    ),
    result(
        "flex/causal/s2/fwd",
        "compile",
        "pass",
        compile_s=5.0,
        step_ms=6.0,
        sdpa_ms=4.0,
        mask_ms=0.6,
    ),
    result("flex/causal/s1/fwdbwd", "compile", "skip", message=SKIP),
    result("flex/alibi/s1/fwd", "compile", "compile_timeout", stage="compile"),
    result("flex/alibi/s1/fwdbwd", "compile", "skip", message=SKIP),
    result("flex/softcap/s1/fwd", "compile", "accuracy_fail", stage="parity", compile_s=4.0),
    result("flex/causal/s1/fwd", "eager", "pass"),
    result("flex/alibi/s1/fwd", "eager", "pass"),
    result("flex/softcap/s1/fwd", "eager", "eager_fail", stage="run"),
    result("smoke/mlp", "compile", "pass"),
]
RUN = {
    "config": {"dtype": "float32", "compile_timeout_s": 60},
    "plan": [[r["case"], r["mode"]] for r in RESULTS],
}


def test_headline_reads_like_the_published_figure():
    built = view.build(RUN, RESULTS)
    assert built.title == (
        "FlexAttention (float32): compile: 2 of 4 passed, 1 past the "
        "compile limit (60 s), 1 failed (1 accuracy_fail); 2 skipped"
    )
    assert built.notes[0] == (
        "eager: 2 of 3 passed, 0 past the compile limit (60 s), 1 failed (1 eager_fail)"
    )
    assert built.notes[1] == f"skipped 2: {SKIP}"


def test_rows_per_family_with_first_call_times():
    rows = {r["variant"]: r for r in view.build(RUN, RESULTS).records()}
    assert list(rows) == ["causal", "alibi", "softcap", "all"]
    causal = rows["causal"]
    assert (causal["ran"], causal["passed"], causal["skipped"]) == (2, 2, 1)
    assert causal["first call s"] == 4.0 and causal["first call range s"] == Span(3.0, 5.0)
    assert causal["step ms"] == Span(2.0, 6.0) and causal["vs SDPA"] == 1.75  # median 2x, 1.5x
    assert causal["mask build ms"] == 0.5
    alibi = rows["alibi"]
    assert (alibi["past limit"], alibi["first call s"], alibi["failed"]) == (1, None, 0)
    assert rows["softcap"]["failed"] == Annotated(1, "accuracy_fail")
    assert rows["softcap"]["first call s"] == 4.0  # compiled, then failed parity
    total = rows["all"]
    assert (total["ran"], total["passed"], total["past limit"], total["skipped"]) == (4, 2, 1, 2)


def test_no_limit_and_eager_only_runs():
    eager = [r for r in RESULTS if r["mode"] == "eager"]
    built = view.build({"config": {"dtype": "bfloat16"}, "plan": []}, eager)
    assert built.title.startswith(
        "FlexAttention (bfloat16): eager: 2 of 3 passed, 0 past the compile limit (none set)"
    )
    assert built.records()[0]["first call s"] == 0.5
    same = [
        result("flex/causal/s1/fwd", "compile", "pass", compile_s=1.0, step_ms=16.1),
        result("flex/causal/s2/fwd", "compile", "pass", compile_s=1.0, step_ms=16.12),
    ]
    row = view.build(RUN, same).records()[0]
    assert (row["first call s"], row["first call range s"]) == (1.0, None)
    assert row["step ms"] == Span(16.1, 16.12) and row["vs SDPA"] is None


def test_not_shown_without_flex_results_and_registered():
    assert view.build(RUN, [RESULTS[-1]]) is None
    assert "flex" in build_views(RUN, RESULTS)
