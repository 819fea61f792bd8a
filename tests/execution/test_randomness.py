"""Comparable randomness and compared steps: the same dropout masks on every side, buffers
restored and returned, uncontrolled random ops listed, training vs eval mode."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from torchport.cases.base import FunctionCase, Size, Workload  # noqa: E402
from torchport.execution import randomness  # noqa: E402
from torchport.execution.build import build_workload, step_info  # noqa: E402
from torchport.execution.steps import Compared, make_step, place  # noqa: E402


def dropout_workload(*, seed, size, trains=True):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 4), nn.BatchNorm1d(4))
    x = torch.randn(8, 16)
    return Workload(
        model=model, args=(x,), loss_fn=(lambda out: out.pow(2).mean()) if trains else None
    )


CASE = FunctionCase("t/dropout", dropout_workload)


def compared_outputs(workload, dtype, seed=0, runner=None):
    placed = place(workload, "cpu", dtype)
    compared = Compared(seed)
    step = make_step(
        runner(placed.model) if runner else placed.model, placed.model, placed, compared=compared
    )
    return step(), step(), compared


def test_training_step_runs_in_train_mode_and_inference_in_eval():
    assert build_workload(CASE, seed=0, size=Size()).model.training
    forward_only = FunctionCase(
        "t/fwd", lambda *, seed, size: dropout_workload(seed=seed, size=size, trains=False)
    )
    workload = build_workload(forward_only, seed=0, size=Size())
    assert not workload.model.training
    assert step_info(workload) == {"kind": "inference forward", "mode": "eval"}


def test_masks_are_the_same_in_float32_and_float64_and_every_call_starts_placed():
    workload = build_workload(CASE, seed=0, size=Size())
    first32, again32, compared = compared_outputs(workload, torch.float32)
    first64, _, _ = compared_outputs(workload, torch.float64)
    assert compared.masked_calls == 1
    # repeatable: each call restores the running statistics and restarts the masks
    for name in first32:
        assert torch.equal(first32[name], again32[name]), name
    # float32 against float64: the same masks, so only rounding separates them
    for name in first32:
        assert torch.allclose(first32[name].double(), first64[name], atol=1e-5), name
    # running statistics came back with the outputs and were changed by the step
    assert {"buffer.3.running_mean", "buffer.3.running_var"} <= set(compared.changed)


def test_a_masked_dropout_is_a_dropout_and_repeats_with_the_seed():
    drawn = []
    for _ in range(2):
        with randomness.comparable(7):
            drawn.append(nn.functional.dropout(torch.ones(1000), 0.25, training=True))
    kept = drawn[0] != 0
    assert 0.7 < kept.float().mean() < 0.8  # p = 0.25 dropped
    assert torch.equal(drawn[0][kept], torch.full((int(kept.sum()),), 1 / 0.75))
    assert torch.equal(drawn[0], drawn[1])


def test_compiled_step_draws_the_same_masks_as_eager():
    workload = build_workload(CASE, seed=0, size=Size())
    eager, _, _ = compared_outputs(workload, torch.float32)
    torch._dynamo.reset()
    compiled, _, compared = compared_outputs(
        workload, torch.float32, runner=lambda m: torch.compile(m, backend="aot_eager")
    )
    assert compared.masked_calls == 1
    for name in eager:
        assert torch.allclose(eager[name], compiled[name], atol=1e-6), name


def test_outside_a_compared_step_dropout_is_the_real_kernel():
    x = torch.ones(1000)
    with randomness.watch_random_ops() as seen:
        nn.functional.dropout(x, 0.5, training=True)
    assert seen.ops  # the device's own random kernel ran
    with randomness.comparable(0) as report, randomness.watch_random_ops() as masked:
        nn.functional.dropout(x, 0.5, training=True)
        torch.rand(3)  # a random op nobody controls
    assert report["masked_calls"] == 1
    assert dict(masked.ops) == {"aten.rand": 1}  # the mask itself is not counted
    assert not hasattr(nn.functional.dropout, "__wrapped__")  # restored
