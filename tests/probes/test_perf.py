"""The perf probe: synchronised, interleaved, honest about what it could not measure."""

import logging
import re

import pytest

from tests.probes.perf_helpers import RecordingAdapter, make_subject, mlp_case
from torchport.probes.perf import PerfProbe, RecompileLimitWatch
from torchport.views import perf as perf_view

KEYS = (
    "perf_median_ms",
    "perf_p10_ms",
    "perf_p90_ms",
    "perf_cv",
    "perf_samples",
    "perf_eager_median_ms",
    "perf_tokens_per_s",
    "perf_samples_per_s",
    "perf_flops_per_step",
    "perf_achieved_tflops",
    "perf_flops_6nt_per_step",
    "perf_peak_bytes",
)


def test_eager_perf_at_the_perf_size():
    adapter = RecordingAdapter()
    report = PerfProbe().safe_run(make_subject(adapter=adapter))
    assert report.error is None, report.error
    m, info = report.metrics, report.findings["perf"]
    assert all(k in m for k in KEYS), sorted(m)
    assert "perf_speedup" not in m and "perf_mfu" not in m  # eager; no peak for a CPU
    assert m["perf_p10_ms"] <= m["perf_median_ms"] <= m["perf_p90_ms"]
    assert m["perf_samples"] >= 10
    assert info["step_kind"] == "training forward+backward"
    assert info["size"]["samples"] == 16  # the perf size, not the parity size (4)
    assert m["perf_samples_per_s"] == pytest.approx(16 / (m["perf_median_ms"] / 1e3))
    assert m["perf_tokens_per_s"] == pytest.approx(64 / (m["perf_median_ms"] / 1e3))
    # every timed sample is bracketed by two synchronisations
    assert adapter.log.count("sync") >= 2 * m["perf_samples"]
    assert any(
        n.startswith("no peak known for") and n.endswith("pass --peak-tflops")
        for n in info["notes"]
    )


def test_compile_mode_times_both_sides_interleaved_and_reports_speedup():
    report = PerfProbe().safe_run(make_subject(mode="compile"))
    m, info = report.metrics, report.findings["perf"]
    assert info["interleaved"] == ["eager", "compiled"]
    assert info["sides"]["eager"]["n"] == info["sides"]["compiled"]["n"]
    assert m["perf_median_ms"] == m["perf_compiled_median_ms"]
    assert m["perf_speedup"] == pytest.approx(
        m["perf_eager_median_ms"] / m["perf_compiled_median_ms"]
    )
    # where the probe's time went besides its timed rounds: recorded, the rounds counted
    phases = info["phases_s"]
    assert set(phases) == {"setup_s", "first_calls_s", "warmup_s", "timed_s", "flops_s", "memory_s"}
    assert all(v >= 0 for v in phases.values()) and phases["timed_s"] > 0
    assert info["rounds"]["timed"] == info["sides"]["eager"]["n"]


def test_mfu_against_a_given_peak():
    report = PerfProbe().safe_run(make_subject(peak_tflops=0.5))
    m = report.metrics
    step_s = m["perf_median_ms"] / 1e3
    assert m["perf_mfu"] == pytest.approx(m["perf_flops_per_step"] / step_s / 0.5e12)
    assert m["perf_mfu_6nt"] == pytest.approx(m["perf_flops_6nt_per_step"] / step_s / 0.5e12)
    assert report.findings["perf"]["peak_source"] == "--peak-tflops"


def test_forward_only_case_is_an_inference_step():
    report = PerfProbe().safe_run(make_subject(mlp_case(trains=False)))
    assert report.findings["perf"]["step_kind"] == "inference forward"
    # 2·N·T for a forward: N = 32*64+64 + 64*8+8 = 2632 parameters, 64 tokens
    assert report.metrics["perf_flops_6nt_per_step"] == 2 * 2632 * 64


def test_a_side_that_cannot_run_is_reported_not_timed():
    from torchport.cases.registry import find_case

    subject = make_subject(find_case("planted", "planted/compile_bomb"), mode="compile")
    report = PerfProbe().safe_run(subject)
    m, info = report.metrics, report.findings["perf"]
    assert "compiled" in info["failed_sides"]
    assert "perf_eager_median_ms" in m
    assert "perf_median_ms" not in m and "perf_speedup" not in m  # no stand-in number
    assert any("no compiled figure" in n for n in info["notes"])


def test_recompile_limit_watch_sees_dynamo_running_frames_eagerly():
    import torch._dynamo

    def f(x):
        return x * 2

    compiled = torch.compile(f, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=1), RecompileLimitWatch() as watch:
        compiled(torch.ones(2))
        compiled(torch.ones(3))  # a second shape past a limit of one: runs eagerly
    torch._dynamo.reset()
    assert watch.hits and "recompile_limit" in watch.hits[0]


def test_recompile_limit_watch_ignores_other_messages():
    with RecompileLimitWatch() as watch:
        logging.getLogger(RecompileLimitWatch.LOGGER).warning("something else")
    assert watch.hits == []


def test_perf_view_rows():
    report = PerfProbe().safe_run(make_subject(mode="compile"))
    result = {
        "case": "test/mlp",
        "mode": "compile",
        "status": "pass",
        "metrics": report.metrics,
        "findings": report.findings,
    }
    view = perf_view.build({}, [result])
    assert view.names[:4] == ["case", "mode", "median ms", "p10-p90 ms"]
    [row] = view.records()
    # the speedup with the two medians it came from (this compile task's interleaved rounds)
    assert row["MFU"] == "no peak" and row["median ms"] > 0
    assert row["speedup"].value > 0 and re.fullmatch(
        r"\S+ / \S+ ms(, from a noisy side)?", row["speedup"].note
    )
    assert any("--peak-tflops" in n for n in view.notes)
    assert (
        perf_view.build(
            {}, [{"case": "x", "mode": "eager", "status": "pass", "metrics": {}, "findings": {}}]
        )
        is None
    )


def test_smoke_mlp_perf_from_the_command_line(run_json):
    out = run_json(
        "--suite",
        "smoke",
        "--cases",
        "smoke/mlp",
        "--device",
        "cpu",
        "--probes",
        "perf",
        "--compile-backend",
        "eager",
    )
    by_mode = {r["mode"]: r for r in out["results"]}
    assert by_mode["eager"]["status"] == by_mode["compile"]["status"] == "pass"
    assert "perf_speedup" in by_mode["compile"]["metrics"]
    assert "perf" in out["views"] and len(out["views"]["perf"]["rows"]) == 2


@pytest.mark.slow
def test_smoke_suite_perf_acceptance(run_json):
    out = run_json("--suite", "smoke", "--device", "cpu", "--probes", "perf")
    for r in out["results"]:
        m = r["metrics"]
        assert {"perf_median_ms", "perf_p10_ms", "perf_p90_ms", "perf_cv"} <= set(m), r["case"]
        if r["case"].startswith("hf/"):
            assert "perf_tokens_per_s" in m
        if r["mode"] == "compile":
            assert "perf_speedup" in m


def test_noisy_sides_are_flagged_with_the_host_load_and_the_speedup_says_so():
    from torchport.probes.perf import NOISE_LIMITS, noisy
    from torchport.timing import Summary

    steady = Summary.of([0.010] * 12)
    scattered = Summary.of([0.001, 0.05] * 6)  # CV far above the limit
    few = Summary.of([0.010] * 3)
    assert noisy(steady) == []
    assert noisy(scattered)[0].startswith("p10-p90 ") and noisy(few) == [
        f"n = 3 < {NOISE_LIMITS['min_samples']}"
    ]
    result = {
        "case": "c",
        "mode": "compile",
        "status": "pass",
        "metrics": {"perf_median_ms": 5.0, "perf_speedup": 5.01},
        "findings": {
            "perf": {
                "noisy": {"eager": ["CV 238% > 10%", "n = 3 < 10"]},
                "speedup_noisy": "from a noisy side: eager (...)",
                "speedup_from": {"eager_median_ms": 10.0, "compiled_median_ms": 2.0},
                "host_load": {"load_avg_1min": 7.5, "cpu_count": 2},
            }
        },
    }
    view = perf_view.build({}, [result])
    [row] = view.records()
    assert row["noisy"] == "eager CV 238% > 10%, n = 3 < 10"
    assert row["speedup"].note == "10 / 2 ms, from a noisy side"
    assert any(
        n.startswith(
            "noisy: outside CV <= 10% and n >= 10; host load then: c (compile) 7.5 on 2 cores"
        )
        for n in view.notes
    )


def test_the_probe_flags_a_side_outside_the_limits(monkeypatch):
    from torchport.probes import perf

    monkeypatch.setitem(perf.NOISE_LIMITS, "min_samples", 10**9)  # no run has that many
    report = PerfProbe().safe_run(make_subject(mode="compile"))
    info = report.findings["perf"]
    assert set(info["noisy"]) == {"eager", "compiled"}
    assert info["speedup_noisy"].startswith("from a noisy side: eager (")
    assert info["noise_limits"]["min_samples"] == 10**9 and "load_avg_1min" in info["host_load"]


def test_noise_is_judged_by_the_robust_spread_not_by_a_few_outliers():
    from torchport.probes.perf import NOISE_LIMITS, noisy
    from torchport.timing import Summary

    # n = 1000 around 10 ms (+-3 %), with 10 samples 50x slower (a shared machine's hiccups)
    steady = [0.010 * (1 + 0.03 * ((i * 37 % 101) / 50 - 1)) for i in range(990)]
    outliers = Summary.of(steady + [0.5] * 10)
    assert outliers.cv > 0.5  # the CV, still recorded, is decided by the outliers
    assert outliers.spread < 0.07
    assert noisy(outliers) == []
    # two modes (half the steps 10 ms, half 20 ms): noisy whatever the sample count
    bimodal = Summary.of([0.010, 0.020] * 500)
    assert bimodal.spread > NOISE_LIMITS["max_spread"]
    assert noisy(bimodal) == [f"p10-p90 {bimodal.spread:.0%} of median > 25%"]


def test_eager_row_and_the_compile_rounds_that_disagree_are_said():
    from torchport.views import perf as perf_view

    def result(mode, metrics, perf=None):
        return {
            "case": "c",
            "mode": mode,
            "status": "pass",
            "metrics": metrics,
            "findings": {"perf": perf or {}},
        }

    eager = result("eager", {"perf_median_ms": 0.324, "perf_p10_ms": 0.3, "perf_p90_ms": 0.35})
    compiled = result(
        "compile",
        {"perf_median_ms": 1.0, "perf_speedup": 16.1},
        {"speedup_from": {"eager_median_ms": 16.1, "compiled_median_ms": 1.0}},
    )
    [note] = perf_view.disagreements([eager, compiled])
    assert note.startswith("c: the eager row (0.324 ms, p10-p90 0.3-0.35)")
    assert "(16.1 ms) are two measurements that disagree" in note
    agreeing = result(
        "compile",
        {"perf_median_ms": 0.1, "perf_speedup": 3.2},
        {"speedup_from": {"eager_median_ms": 0.32, "compiled_median_ms": 0.1}},
    )
    assert perf_view.disagreements([eager, agreeing]) == []


def test_an_eager_row_that_disagrees_with_the_compile_rounds_is_labelled_its_own_task():
    """The table itself (not only a note) tells the two eager figures of one case apart: the
    eager row's median says it is a task of its own, and what the compile task's rounds gave."""
    from torchport.views import perf as perf_view
    from torchport.views.base import Annotated

    def result(mode, metrics, perf=None):
        return {
            "case": "c",
            "mode": mode,
            "status": "pass",
            "metrics": metrics,
            "findings": {"perf": perf or {}},
        }

    eager = result("eager", {"perf_median_ms": 0.324, "perf_p10_ms": 0.3, "perf_p90_ms": 0.35})
    compiled = result(
        "compile",
        {"perf_median_ms": 1.0, "perf_speedup": 16.1},
        {"speedup_from": {"eager_median_ms": 16.1, "compiled_median_ms": 1.0}},
    )
    view = perf_view.build({}, [eager, compiled])
    assert view is not None
    assert view.rows[0][2] == Annotated(0.324, "own task; 16.1 ms beside compiled")
    assert view.rows[1][9] == Annotated(16.1, "16.1 / 1 ms")  # the compile task's own rounds
    agreeing = result(
        "compile",
        {"perf_median_ms": 0.1, "perf_speedup": 3.2},
        {"speedup_from": {"eager_median_ms": 0.32, "compiled_median_ms": 0.1}},
    )
    view = perf_view.build({}, [eager, agreeing])
    assert view is not None and view.rows[0][2] == 0.324


def test_the_eager_row_of_a_compiled_case_shows_the_eager_rounds_beside_compiled():
    """Eager and compiled figures side by side come from the same interleaved rounds: the eager
    row of a case that was also compiled shows the compile task's eager side (its rates at that
    median), so no two rows contradict; the eager task's own, disagreeing, figure is said in a
    note, not shown as a row."""
    from torchport.views import perf as perf_view
    from torchport.views.base import Annotated, Span

    def result(mode, metrics, perf):
        return {"case": "c", "mode": mode, "status": "pass", "metrics": metrics,
                "findings": {"perf": perf}}  # fmt: skip

    eager = result(
        "eager",
        {
            "perf_median_ms": 0.324,
            "perf_p10_ms": 0.3,
            "perf_p90_ms": 0.35,
            "perf_cv": 0.1,
            "perf_samples": 900,
            "perf_tokens_per_s": 1000.0,
            "perf_mfu": 0.02,
        },  # fmt: skip
        {},
    )
    side = {"n": 40, "median_ms": 16.2, "p10_ms": 15.0, "p90_ms": 18.0, "cv": 0.3}
    compiled = result(
        "compile",
        {"perf_median_ms": 1.0, "perf_speedup": 16.2},
        {
            "sides": {"eager": side, "compiled": {"n": 40, "median_ms": 1.0}},
            "speedup_from": {"eager_median_ms": 16.2, "compiled_median_ms": 1.0},
            "noisy": {"eager": ["p10-p90 30% of median > 25%"]},
        },
    )
    view = perf_view.build({}, [eager, compiled])
    assert view is not None
    row = view.rows[0]
    assert row[2] == Annotated(16.2, "interleaved with compiled")
    assert (row[3], row[4], row[5]) == (Span(15.0, 18.0), 0.3, 40)
    assert row[6] == pytest.approx(1000.0 * 0.324 / 16.2)  # tokens/s at that median
    assert row[8] == pytest.approx(0.02 * 0.324 / 16.2)
    assert row[11] == "eager p10-p90 30% of median > 25%"
    assert view.rows[1][9] == Annotated(16.2, "16.2 / 1 ms")  # the same eager median
    # the eager task's own 0.324 ms is not a row: one note says it, with why
    [said] = [n for n in view.notes if n.startswith("c: the eager row shows")]
    assert "own measurement (0.324 ms, p10-p90 0.3-0.35) disagrees" in said
    assert not any("own task" in str(cell) for r in view.rows for cell in r)
    # agreeing measurements: the interleaved rounds shown, nothing to say
    side.update(median_ms=0.33, p10_ms=0.31, p90_ms=0.36)
    compiled["findings"]["perf"]["speedup_from"]["eager_median_ms"] = 0.33
    view = perf_view.build({}, [eager, compiled])
    assert view is not None and view.rows[0][2] == Annotated(0.33, "interleaved with compiled")
    assert not any(n.startswith("c: the eager row shows") for n in view.notes)
