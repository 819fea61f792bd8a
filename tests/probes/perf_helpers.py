"""Small subjects for the perf, train and profile probe tests: no worker, no ladder."""

from __future__ import annotations

from torchport.cases.base import FunctionCase, Size, Workload
from torchport.config import RunConfig
from torchport.devices.cpu import CPUAdapter
from torchport.probes.base import Subject


class RecordingAdapter(CPUAdapter):
    """The CPU, counting every synchronisation (and keeping the order of events)."""

    def __init__(self, log: list | None = None):
        self.log = [] if log is None else log

    def synchronize(self):
        self.log.append("sync")


def mlp_workload(*, seed: int, size: Size, trains: bool = True) -> Workload:
    import torch

    torch.manual_seed(seed)
    batch = size.batch or (16 if size.perf else 4)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    x, target = torch.randn(batch, 32), torch.randn(batch, 8)
    loss_fn = (
        (lambda out: torch.nn.functional.mse_loss(out, target.to(out.device, out.dtype)))
        if trains
        else None
    )
    return Workload(model=model, args=(x,), loss_fn=loss_fn, samples=batch, tokens=batch * 4)


def mlp_case(trains: bool = True) -> FunctionCase:
    return FunctionCase(
        "test/mlp" if trains else "test/mlp_forward",
        lambda *, seed, size: mlp_workload(seed=seed, size=size, trains=trains),
    )


def make_subject(case=None, *, mode: str = "eager", adapter=None, **config) -> Subject:
    """A placed parity-size subject as the ladder would hand it to a probe."""
    import torch

    from torchport.execution.steps import make_step, place

    case = case or mlp_case()
    config = RunConfig(device="cpu", perf_budget_s=0.05, compile_backend="eager", **config)
    adapter = adapter or RecordingAdapter()
    workload = case.build(seed=config.seed, size=Size())
    placed = place(workload, "cpu", getattr(torch, config.dtype))
    runner = torch.compile(placed.model, backend="eager") if mode == "compile" else placed.model
    return Subject(
        case=case,
        mode=mode,
        config=config,
        adapter=adapter,
        device="cpu",
        dtype=getattr(torch, config.dtype),
        workload=placed,
        model=placed.model,
        runner=runner,
        step=make_step(runner, placed.model, placed),
        make_runner=lambda: runner,
    )
