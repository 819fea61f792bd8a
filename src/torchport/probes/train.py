"""Training-loss parity (--train-steps N): does the model learn the same on the device?

The model trains in training mode (dropout, batch statistics); dropout masks are drawn the
same way on every side over the whole run (``execution.randomness``, recorded in findings).

N optimizer steps on the device (through this mode's runner) against the same N on the CPU in
float64 from the same seed and data (the same batch every step), and the same N on the CPU at
the run's dtype (the baseline: how far that dtype alone drifts). Divergence at a step is
|loss_device - loss_reference| / max(|loss_reference|, tiny); the probe fails (accuracy_fail,
stage "train") when the largest exceeds K * the baseline's largest + the dtype's floor: the same
noise-relative rule parity uses.
"""

from __future__ import annotations

import math
from typing import Any

from torchport.cases.base import Size
from torchport.probes.base import Probe, ProbeReport, Subject

PROBE_VERSION = 2
LEARNING_RATE = 1e-3
K = 3.0
FLOOR = {"float32": 1e-3, "bfloat16": 3e-2, "float16": 1e-2}
TINY = 1e-12
# (case id, version, seed, batch, seq, steps, dtype, optimizer factory) -> (reference, baseline)
# loss curves: the CPU sides are the same for every mode of a case, and float64 is the slow one.
_CPU_CURVES: dict[tuple, tuple[list, list]] = {}


def make_optimizer(params, side: str):
    """The optimizer every side uses: AdamW, fixed lr, no weight decay (nothing to tune).

    ``side`` ("device", "reference", "baseline") lets a test plant a wrong update on one side.
    """
    import torch

    return torch.optim.AdamW(params, lr=LEARNING_RATE, weight_decay=0.0)


def train_losses(model, runner, workload, steps: int, side: str, sync=lambda: None) -> list:
    """Loss before each of ``steps`` optimizer steps, as Python floats (nan/inf kept)."""
    optimizer = make_optimizer(model.parameters(), side)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = workload.loss_fn(runner(*workload.args, **workload.kwargs))
        loss.backward()
        optimizer.step()
        sync()
        losses.append(loss.detach().item())  # .item() waits for the step to finish
    return losses


def divergence(losses: list, reference: list) -> list:
    """Relative divergence per step; inf where the loss was not finite."""
    out = []
    for got, want in zip(losses, reference, strict=True):
        if not (math.isfinite(got) and math.isfinite(want)):
            out.append(math.inf)
        else:
            out.append(abs(got - want) / max(abs(want), TINY))
    return out


class TrainProbe(Probe):
    name = "train"
    version = PROBE_VERSION

    def applies(self, subject: Subject) -> bool:
        return subject.config.train_steps > 0

    def run(self, subject: Subject) -> ProbeReport:
        import torch

        from torchport.execution.steps import place

        report = ProbeReport()
        config, steps = subject.config, subject.config.train_steps
        from torchport.execution.randomness import DESCRIPTION

        info: dict[str, Any] = {
            "steps": steps,
            "step_kind": "training step with optimizer",
            "step_mode": "train",
            "randomness": DESCRIPTION,
            "optimizer": f"AdamW(lr={LEARNING_RATE}, weight_decay=0)",
            "data": "the parity-size batch, the same every step",
            "notes": [],
        }
        report.findings["train"] = info
        from torchport.execution.build import build_workload

        workload = build_workload(
            subject.case, seed=config.seed, size=Size(batch=config.batch, seq=config.seq)
        )
        if not workload.trains:
            info["notes"].append("forward-only case: nothing to train")
            return report

        def run_side(device, dtype, side, compiled=False):
            from torchport.execution.randomness import comparable

            placed = place(workload, device, dtype)
            runner = placed.model
            if compiled:
                from torchport.probes.perf import compile_fresh

                runner = compile_fresh(subject, placed.model)
            sync = subject.adapter.synchronize if side == "device" else (lambda: None)
            # One mask sequence over all steps, the same on every side (randomness.py).
            with comparable(config.seed):
                return train_losses(placed.model, runner, placed, steps, side, sync)

        key = (
            subject.case.id,
            subject.case.version,
            config.seed,
            config.batch,
            config.seq,
            steps,
            config.dtype,
            make_optimizer,
        )
        if key not in _CPU_CURVES:
            _CPU_CURVES.clear()
            _CPU_CURVES[key] = (
                run_side("cpu", torch.float64, "reference"),
                run_side("cpu", subject.dtype, "baseline"),
            )
        reference, baseline = _CPU_CURVES[key]
        device = run_side(
            subject.device, subject.dtype, "device", compiled=subject.mode == "compile"
        )
        div, base_div = divergence(device, reference), divergence(baseline, reference)
        worst = max(range(steps), key=lambda i: div[i])
        tolerance = K * max(base_div) + FLOOR[config.dtype]
        info.update(
            device_losses=_jsonable(device),
            reference_losses=_jsonable(reference),
            baseline_losses=_jsonable(baseline),
            worst_step=worst,
            baseline_max_divergence=_finite(max(base_div)),
            tolerance=_finite(tolerance),
            rule=f"max divergence <= {K} x baseline's + {FLOOR[config.dtype]}",
        )
        if math.isfinite(div[worst]):
            report.metrics["train_max_loss_divergence"] = div[worst]
        else:
            info["notes"].append(f"device loss not finite at step {worst}: divergence unbounded")
        if math.isfinite(device[-1]):
            report.metrics["train_final_loss"] = device[-1]
        if math.isfinite(reference[-1]):
            report.metrics["train_reference_final_loss"] = reference[-1]
        if not math.isfinite(tolerance):
            info["notes"].append(
                f"the CPU baseline in {config.dtype} diverged too: this dtype "
                "cannot train the case with this optimizer; no verdict"
            )
        elif not div[worst] <= tolerance:
            report.status, report.stage = "accuracy_fail", "train"
            report.error = {
                "type": "TrainingDivergence",
                "traceback": None,
                "message": f"training loss diverged from the float64 reference: "
                f"{div[worst]:.3g} relative at step {worst} > tolerance "
                f"{tolerance:.3g}",
            }
        return report


def _finite(x: float) -> float | None:
    """JSON has no nan/inf: a non-finite figure is recorded as None."""
    return x if math.isfinite(x) else None


def _jsonable(losses: list) -> list:
    return [_finite(x) for x in losses]
