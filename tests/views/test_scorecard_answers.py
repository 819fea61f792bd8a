"""The scorecard's answers from results given directly (no store, no run): each states the
numbers it was computed from, and names the parts that hold them."""

from __future__ import annotations

from torchport.views.evaluation import Group, Plan
from torchport.views.scorecard_answers import (
    Reader,
    compile_wait,
    hotspots,
    kernels,
    on_device,
    runs_in,
    speed,
    speed_pairs,
)


def _reader(results_by_part: dict[str, list[dict]]) -> Reader:
    runs = {(p, "device"): {"id": f"run-{p}", "state": "complete"} for p in results_by_part}
    reader = Reader.__new__(Reader)
    reader.group = Group(Plan("ev", "simdev", None, 60, []), runs, [])
    reader.results = {(p, "device"): rs for p, rs in results_by_part.items()}
    return reader


def _result(case, **findings_and_metrics):
    metrics = findings_and_metrics.pop("metrics", {})
    return {"case": case, "mode": "eager", "status": "pass", "metrics": metrics,
            "findings": findings_and_metrics}  # fmt: skip


def test_hot_spots_rank_ops_and_fall_back_to_modules():
    ops = _reader(
        {
            "hotspots": [
                _result(
                    "hf/llama",
                    hotspots={
                        "ops": [
                            {"op": "aten.mm", "saving_ms": 3.0, "share": 0.5},
                            {"op": "aten.add", "saving_ms": 1.0},
                        ]
                    },
                ),  # fmt: skip
            ],
            "smoke": [_result("smoke/mlp")],
        }
    )
    answer = hotspots(ops)
    assert answer.answer.startswith("the ops with most time to save")
    assert "aten.mm in hf/llama [eager] (3 ms/step to save, 50% of the op time)" in answer.answer
    assert answer.figures == {"ranked": 2, "by": "op", "top_saving_ms": 3.0}
    assert [e["part"] for e in answer.evidence] == ["hotspots"]
    modules = _reader(
        {
            "hotspots": [
                _result(
                    "hf/llama",
                    hotspots={
                        "ops": [],
                        "modules": [{"op": "layers.0.self_attn", "saving_ms": 9.0}],
                    },
                )
            ]
        }  # fmt: skip
    )
    answer = hotspots(modules)
    assert answer.figures["by"] == "module" and "layers.0.self_attn" in answer.answer
    assert answer.evidence[0]["view"] == "hotspots_modules"
    assert hotspots(_reader({"smoke": [_result("smoke/mlp")]})).tone == "none"


def test_compile_wait_states_its_medians_and_longest():
    reader = _reader(
        {
            "smoke": [
                _result(
                    "a",
                    metrics={"compile_cold_first_step_s": 2.0, "compile_warm_first_step_s": 1.0},
                ),  # fmt: skip
                _result("b", metrics={"compile_cold_first_step_s": 6.0}),
            ],
            "ops": [_result("ops/relu/float32")],
        }
    )
    answer = compile_wait(reader)
    assert answer.figures == {
        "cold_median_s": 4.0,
        "cold_results": 2,
        "warm_median_s": 1.0,
        "warm_results": 1,
    }
    assert "longest 6 s, b" in answer.answer
    assert [e["part"] for e in answer.evidence] == ["smoke"]


def test_placement_on_the_host_itself_is_not_graded():
    reader = _reader({"smoke": [dict(_result("smoke/mlp"), grade=None)]})
    assert on_device(reader, "cpu").answer == "the CPU is the host: placement is not graded"
    assert on_device(reader, "simdev").tone == "none"


def _timed(case, median_ms, load_avg, noisy=None):
    perf = {"host_load": {"load_avg_1min": load_avg, "cpu_count": 2}}
    if noisy:
        perf["noisy"] = noisy
    metrics = {"perf_median_ms": median_ms, "perf_p10_ms": median_ms * 0.98,
               "perf_p90_ms": median_ms * 1.02, "perf_samples": 40}  # fmt: skip
    return _result(case, perf=perf, metrics=metrics)


def _two_sided(device: list[dict], reference: list[dict]) -> Reader:
    reader = _reader({"smoke": device})
    reader.group.runs[("smoke", "reference")] = {"id": "run-ref", "state": "complete"}
    reader.results[("smoke", "reference")] = reference
    return reader


def test_a_speed_ratio_from_an_oversubscribed_or_noisy_side_is_shown_but_not_judged():
    calm = _two_sided([_timed("smoke/mlp", 10.0, 0.5)], [_timed("smoke/mlp", 20.0, 0.8)])
    answer = speed(calm, "cpu")
    assert answer.tone == "good" and answer.figures["faster"] == 1
    assert "not judged 0" in answer.answer
    # the same figures with the reference side timed at load 15 on 2 CPUs: a ratio, no verdict
    loaded = _two_sided([_timed("smoke/mlp", 10.0, 0.5)], [_timed("smoke/mlp", 20.0, 15.0)])
    answer = speed(loaded, "cpu")
    assert answer.tone == "info" and answer.figures["faster"] == 0
    assert "x2.00" in answer.answer and "host load 15 on 2 CPUs" in answer.answer
    assert [p["verdict"] for p in speed_pairs(loaded)] == [None]
    noisy = _two_sided(
        [_timed("smoke/mlp", 10.0, 0.5, noisy={"eager": ["cv 0.4"]})],
        [_timed("smoke/mlp", 20.0, 0.5)],
    )
    assert speed_pairs(noisy)[0]["unfit"] == "smoke/mlp [eager] timed noisy"


def test_runs_eager_counts_each_family_the_cases_recorded():
    def tagged(case, status, tags):
        r = _result(case, tags=list(tags))
        r["status"] = status
        return r

    reader = _reader(
        {
            "smoke": [
                tagged("smoke/mlp", "pass", ["dense"]),
                tagged("smoke/convnet", "eager_fail", ["conv"]),
                tagged("hf/llama", "pass", ["dense", "attention"]),
            ]
        }
    )
    answer = runs_in(reader, "eager", "run", "runs eager?")
    assert answer.figures["passed"] == 2 and answer.figures["cases"] == 3
    assert answer.figures["by_family"] == {
        "dense": {"passed": 2, "cases": 2},
        "conv": {"passed": 0, "cases": 1},
        "attention": {"passed": 1, "cases": 1},
    }
    assert "by family: attention 1/1, conv 0/1, dense 2/2" in answer.answer


def test_replacement_kernels_answer_from_their_verdicts():
    def kernel(case, status, verdict, speedup=None):
        r = _result(case, kernel={"verdict": verdict}, metrics={"kernel_step_speedup": speedup})
        r["status"] = status
        return r

    assert kernels(_reader({"smoke": [_result("smoke/mlp")]})).tone == "none"
    reader = _reader(
        {
            "workload:k:fast": [kernel("workload/k:fast", "pass", "correct_faster", 1.31)],
            "workload:k:slow": [kernel("workload/k:slow", "pass", "correct_slower", 0.71)],
        }
    )
    answer = kernels(reader)
    assert answer.figures == {"tried": 2, "correct": 2, "faster": 1}
    assert answer.tone == "good" and "workload/k:fast [eager] correct_faster, step x1.31" in (
        answer.answer
    )
    reader.results[("workload:k:wrong", "device")] = [
        kernel("workload/k:wrong", "accuracy_fail", "sample_mismatch")
    ]
    reader.group.runs[("workload:k:wrong", "device")] = {"id": "run-w", "state": "complete"}
    answer = kernels(reader)
    assert answer.tone == "bad" and "workload/k:wrong [eager] accuracy_fail" in answer.answer
    assert {e["part"] for e in answer.evidence} == {
        "workload:k:fast",
        "workload:k:slow",
        "workload:k:wrong",
    }
