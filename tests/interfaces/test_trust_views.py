"""What show and results print for the evidence of issue 10: a parity failure's tensors, how
host ops were found, tensors left on the host, step kind and mode, the compile backend."""

from torchport.interfaces.formats import cell
from torchport.views import matrix, placement
from torchport.views.base import outcome


def test_a_parity_failure_shows_its_tensors_not_its_step_time():
    failed = {
        "case": "c",
        "mode": "eager",
        "status": "accuracy_fail",
        "stage": "parity",
        "metrics": {"perf_median_ms": 8.28},
        "error": {
            "message": (
                "2 / 4 tensors outside tolerance; worst grad.w: rel err 0.01, RMSE 7.8x "
                "allowed (1x the CPU float32 error)"
            )
        },
    }
    shown = cell(outcome(failed), "outcome")
    assert shown.startswith(
        "accuracy_fail @parity (2 / 4 tensors outside tolerance; worst grad.w: rel err 0.01"
    )
    assert "ms/step" not in shown


def test_notes_say_step_kind_mode_and_compile_backend():
    results = [
        {
            "case": "a",
            "mode": "compile",
            "status": "pass",
            "findings": {
                "step": {
                    "kind": "training forward+backward",
                    "mode": "train",
                    "randomness": {"masked_dropout_calls": 2},
                },
                "compile_backend": {"name": "quirkdev", "reason": "Inductor has no code generator"},
            },
        }
    ]
    notes = matrix.build({"config": {"modes": ["compile"]}}, results).notes
    assert notes == [
        "steps: training forward+backward in train mode (1)",
        "dropout masks drawn on the CPU and applied identically on every side: a",
        "compile backend quirkdev, mode default: Inductor has no code generator",
    ]


def test_placement_names_how_each_host_op_was_found_and_what_stayed_behind():
    result = {
        "case": "hf/llama",
        "mode": "eager",
        "status": "pass",
        "grade": "fallback",
        "metrics": {"placement_copies": 1, "placement_h2d_bytes": 32},
        "findings": {
            "fallback_ops": {"aten.embedding_dense_backward.default": 1},
            "host_ops": [
                {
                    "op": "aten.embedding_dense_backward.default",
                    "count": 1,
                    "found_by": [
                        "dispatcher: served by the backend's fallback",
                        "nested: aten.embedding_dense_backward on the host x1",
                    ],
                }
            ],
            "placement_off_device": [
                {
                    "name": "rotary.inv_freq",
                    "kind": "buffer",
                    "device": "cpu",
                    "bytes": 32,
                    "copies_per_step": 1,
                }
            ],
        },
    }
    view = placement.build({"config": {"probes": ["placement"]}}, [result])
    [row] = view.records()
    assert row["found by"] == "embedding_dense_backward: dispatcher, nested"
    assert (
        "hf/llama (eager) left on the host: rotary.inv_freq (buffer, 1 copies per step)"
        in view.notes
    )
