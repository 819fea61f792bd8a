"""Training-loss parity: N optimizer steps on the device against the CPU float64 reference."""

import math

import pytest
import torch

from tests.probes.perf_helpers import RecordingAdapter, make_subject, mlp_case
from torchport.cases.registry import find_case
from torchport.config import RunConfig
from torchport.probes import train
from torchport.probes.train import TrainProbe, divergence
from torchport.runner.ladders.model import Ladder
from torchport.views import train as train_view


def test_divergence_is_relative_and_unbounded_when_not_finite():
    assert divergence([1.1, 2.0], [1.0, 2.0]) == [pytest.approx(0.1), 0.0]
    assert divergence([math.nan], [1.0]) == [math.inf]


def test_same_training_on_the_device_passes():
    report = TrainProbe().safe_run(make_subject(train_steps=5))
    info = report.findings["train"]
    assert report.status is None and report.error is None
    assert len(info["device_losses"]) == len(info["reference_losses"]) == 5
    assert info["device_losses"][-1] < info["device_losses"][0]  # it learns
    assert report.metrics["train_max_loss_divergence"] < 1e-5


def planted_divergent_optimizer(params, side):
    """A wrong update on the device side only: the learning rate 20 times too large."""
    params = list(params)
    lr = train.LEARNING_RATE * (20 if side == "device" else 1)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)


def test_planted_divergent_optimizer_is_detected(monkeypatch):
    monkeypatch.setattr(train, "make_optimizer", planted_divergent_optimizer)
    report = TrainProbe().safe_run(make_subject(train_steps=5))
    assert report.status == "accuracy_fail" and report.stage == "train"
    assert report.metrics["train_max_loss_divergence"] > report.findings["train"]["tolerance"]
    assert "diverged" in report.error["message"]


def test_divergence_fails_the_result_through_the_ladder(monkeypatch):
    monkeypatch.setattr(train, "make_optimizer", planted_divergent_optimizer)
    config = RunConfig(device="cpu", probes=("train",), train_steps=4)
    out = Ladder(
        find_case("smoke", "smoke/mlp"), "eager", config, RecordingAdapter(), lambda event: None, {}
    ).run()
    assert out["status"] == "accuracy_fail" and out["stage"] == "train"
    view = train_view.build({}, [out])
    assert view.rows[0][0] == "smoke/mlp" and view.rows[0][-1] == "diverged"


def test_no_verdict_when_the_cpu_baseline_diverges_too(monkeypatch):
    def broken_in_the_run_dtype(params, side):
        lr = train.LEARNING_RATE if side == "reference" else float("nan")
        return torch.optim.SGD(list(params), lr=lr)

    monkeypatch.setattr(train, "make_optimizer", broken_in_the_run_dtype)
    report = TrainProbe().safe_run(make_subject(train_steps=3, seed=7))
    info = report.findings["train"]
    assert report.status is None and info["tolerance"] is None
    assert "train_max_loss_divergence" not in report.metrics  # unbounded: no number
    assert any("no verdict" in n for n in info["notes"])
    assert None in info["device_losses"]  # nan is not JSON: recorded as None
    view = train_view.build(
        {},
        [
            {
                "case": "test/mlp",
                "mode": "eager",
                "status": "pass",
                "metrics": report.metrics,
                "findings": report.findings,
            }
        ],
    )
    assert view.rows[0][-1] == "no verdict"


def test_compile_mode_trains_through_a_compiled_runner():
    report = TrainProbe().safe_run(make_subject(mode="compile", train_steps=3))
    assert report.status is None and report.metrics["train_max_loss_divergence"] < 1e-5


def test_forward_only_case_has_nothing_to_train():
    report = TrainProbe().safe_run(make_subject(mlp_case(trains=False), train_steps=3))
    assert report.findings["train"]["notes"] == ["forward-only case: nothing to train"]
    assert not report.metrics


def test_probe_applies_only_when_steps_are_asked_for():
    assert not TrainProbe().applies(make_subject())
    assert TrainProbe().applies(make_subject(train_steps=1))
