"""View details for results from out-of-tree backends: error text trimmed in the middle, the
speedup next to its medians, the weaker reference labelled and counted apart."""

from torchport.interfaces.formats import brief_error, cell
from torchport.views import coverage, matrix, perf
from torchport.views.base import Annotated, Fraction, outcome


def test_error_text_keeps_the_op_and_the_backend():
    message = (
        "Could not run 'aten::empty_strided' with arguments from the 'jax' backend. "
        "This could be because the operator doesn't exist for this backend"
    )
    result = {
        "case": "hf/llama",
        "mode": "eager",
        "status": "place_fail",
        "stage": "place",
        "error": {"message": message},
    }
    shown = cell(outcome(result), "outcome")
    assert "'aten::empty_strided'" in shown and "'jax' backend" in shown
    long = "x" * 80 + " 'aten::nonzero' on 'jax' " + "y" * 80
    trimmed = brief_error(long, 100)
    assert len(trimmed) <= 100 and trimmed.startswith("x") and trimmed.endswith("y")
    assert "…" in trimmed


def test_speedup_is_shown_with_the_medians_it_came_from():
    result = {
        "case": "smoke/mlp",
        "mode": "compile",
        "status": "pass",
        "metrics": {"perf_median_ms": 5.4, "perf_speedup": 1.6},
        "findings": {
            "perf": {"speedup_from": {"eager_median_ms": 8.64, "compiled_median_ms": 5.4}}
        },
    }
    assert perf.row(result)[9] == Annotated(1.6, "8.64 / 5.4 ms")
    view = perf.build({}, [result])
    assert any("compile row's own interleaved rounds" in n for n in view.notes)


def test_the_weaker_reference_is_labelled_and_counted_apart():
    weak = {
        "reference": {
            "kind": "float32",
            "label": "float32 (float64 failed: RuntimeError: overflow)",
        }
    }
    results = [
        {
            "case": "hf/xglm",
            "mode": "eager",
            "status": "pass",
            "findings": weak,
            "metrics": {"parity_max_rel_err": 1e-6},
        },
        {
            "case": "hf/gpt2",
            "mode": "eager",
            "status": "pass",
            "findings": {},
            "metrics": {"parity_max_rel_err": 1e-6},
        },
    ]
    run = {"plan": [["hf/xglm", "eager"], ["hf/gpt2", "eager"]]}
    table = matrix.build(run, results)
    assert table.notes == [
        "hf/xglm (eager): reference: float32 (float64 failed: RuntimeError: overflow)"
    ]
    view = coverage.build(run, results)
    assert view.rows[0][-1] == Fraction(1, 2)  # parity: the float64-judged case only
    assert any("1 passed on that weaker reference" in n for n in view.notes)
