"""The ladder's case hooks: a reference computed by another module, a skip decided in the
worker, and alternatives timed by the perf probe as sides of their own."""

import pytest

torch = pytest.importorskip("torch")

from torchport.cases.base import Case, FunctionCase, Workload  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.runner.ladders.model import Ladder  # noqa: E402


def run_ladder(case, mode, **config):
    events = []
    cfg = RunConfig(device="cpu", **{"probes": (), **config})
    result = Ladder(case, mode, cfg, CPUAdapter(), events.append, {}).run()
    return result, [e["stage"] for e in events]


class Scaled(torch.nn.Module):
    """lin(x) * factor: the same parameter names whatever the factor."""

    def __init__(self, lin, factor=1.0):
        super().__init__()
        self.lin, self.factor = lin, factor

    def forward(self, x):
        return self.lin(x) * self.factor


def case_with(reference_factor=None, alternatives=()):
    def fn(seed, size):
        torch.manual_seed(seed)
        lin = torch.nn.Linear(8, 8)
        return Workload(
            model=Scaled(lin),
            args=(torch.randn(4, 8),),
            loss_fn=lambda out: out.pow(2).mean(),
            reference_model=None if reference_factor is None else Scaled(lin, reference_factor),
            alternatives={name: Scaled(lin) for name in alternatives},
        )

    return FunctionCase("test/hooks", fn)


def test_reference_model_computes_the_reference():
    result, _ = run_ladder(case_with(reference_factor=1.0), "eager")
    assert result["status"] == "pass", result["error"]
    assert result["metrics"]["parity_tensors"] == 1 + 1 + 2  # out, loss, lin.weight, lin.bias


def test_a_reference_model_that_disagrees_fails_parity():
    """Proof the hook is used: the model is right by itself, only the reference is off."""
    result, _ = run_ladder(case_with(reference_factor=1.1), "eager")
    assert (result["status"], result["stage"]) == ("accuracy_fail", "parity")
    assert "out" in result["findings"]["parity_failures"]


class SkipsCompileOnCPU(Case):
    id, tags = "test/skips", ("t",)

    def skip_reason_for(self, *, mode, device):
        return f"no {mode} on {device}" if mode == "compile" and device == "cpu" else None

    def build(self, *, seed, size):
        return case_with().build(seed=seed, size=size)


def test_skip_decided_in_the_worker_is_data():
    eager, _ = run_ladder(SkipsCompileOnCPU(), "eager")
    assert eager["status"] == "pass"
    skipped, stages = run_ladder(SkipsCompileOnCPU(), "compile")
    assert skipped["status"] == "skip" and skipped["error"]["message"] == "no compile on cpu"
    assert stages == []


def test_perf_times_each_alternative_as_a_side():
    result, _ = run_ladder(
        case_with(alternatives=("other",)), "eager", probes=("perf",), perf_budget_s=0.2
    )
    assert result["status"] == "pass", result["error"]
    metrics, sides = result["metrics"], result["findings"]["perf"]["interleaved"]
    assert sides == ["eager", "other"]
    assert metrics["perf_other_median_ms"] > 0 and metrics["perf_eager_median_ms"] > 0
