"""Building a case: the one way every process (worker, perf pass, compile child) builds one.

The same seed, size and step mode everywhere, so the computation a probe times or compiles is
the computation parity checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchport.cases.base import Case, Size, Workload


def build_workload(case: Case, *, seed: int, size: Size) -> Workload:
    """The case's workload on the CPU in float32, in the mode its steps run in.

    A training step (the case has a loss: forward + backward) runs in training mode: dropout
    on, BatchNorm on batch statistics and updating its running statistics, as training does;
    the device and the reference are made comparable by ``steps.Compared`` (masks and buffers),
    not by switching training behaviour off. An inference step runs in eval mode.
    """
    workload = case.build(seed=seed, size=size)
    workload.model.train(workload.trains)
    if workload.reference_model is not None:
        workload.reference_model.train(workload.trains)
    return workload


def step_info(workload: Workload) -> dict:
    """findings["step"]: what one step is and the mode the model runs it in."""
    return {
        "kind": "training forward+backward" if workload.trains else "inference forward",
        "mode": "train" if workload.trains else "eval",
    }


def build_placed(
    case: Case, *, seed: int, size: Size, device: str, dtype, host_scope=None
) -> Workload:
    """Built on the CPU (under ``host_scope``: see ``DeviceAdapter.host_scope``), placed."""
    import contextlib

    from torchport.execution.steps import place

    with (host_scope or contextlib.nullcontext)():
        workload = build_workload(case, seed=seed, size=size)
    return place(workload, device, dtype, host_scope=host_scope)


class StageFailed(Exception):
    """An exception raised inside a named stage, carrying the stage."""

    def __init__(self, stage: str, exc: BaseException):
        super().__init__(f"{stage}: {exc}")
        self.stage, self.exc = stage, exc


def staged(emit: Callable[[dict], None], stage: str, fn: Callable[[], Any]) -> Any:
    """Announce ``stage`` on the event channel, run ``fn``; a raise becomes StageFailed."""
    emit({"event": "stage", "stage": stage})
    try:
        return fn()
    except Exception as exc:
        raise StageFailed(stage, exc) from exc
