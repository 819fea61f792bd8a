"""The stage ladder in-process on passing cases, and its failure classification."""

import pytest

torch = pytest.importorskip("torch")

from torchport.cases.base import FunctionCase, Workload  # noqa: E402
from torchport.cases.smoke import smoke_suite  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.runner.ladders.model import Ladder  # noqa: E402


def run_ladder(case, mode, **config):
    events = []
    cfg = RunConfig(device="cpu", probes=(), **config)
    result = Ladder(case, mode, cfg, CPUAdapter(), events.append, {}).run()
    return result, [e["stage"] for e in events]


@pytest.fixture(scope="module")
def mlp():
    return next(c for c in smoke_suite() if c.id == "smoke/mlp")


def test_eager_climbs_build_place_run_parity(mlp):
    result, stages = run_ladder(mlp, "eager")
    assert result["status"] == "pass", result["error"]
    assert stages == ["build", "place", "run", "reference", "parity"]
    assert {"build_s", "place_s", "run_s", "parity_s"} <= set(result["durations"])
    metrics = result["metrics"]
    for key in ("parity_max_abs_err", "parity_max_rel_err", "parity_rmse_ratio", "parity_cosine"):
        assert key in metrics
    assert metrics["parity_cosine"] > 0.999999
    # loss and every gradient took part in parity, not only the output
    assert metrics["parity_tensors"] == 1 + 1 + 6  # out, loss, 3 layers x (weight, bias)


def test_compile_adds_compile_and_compiled_run(mlp):
    result, stages = run_ladder(mlp, "compile")
    assert result["status"] == "pass", result["error"]
    assert stages == ["build", "place", "run", "compile", "compiled_run", "reference", "parity"]


def _case(forward, name="t"):
    def fn(seed, size):
        torch.manual_seed(seed)

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

        M.forward = forward
        return Workload(model=M(), args=(torch.randn(2, 4),), loss_fn=lambda out: out.sum())

    return FunctionCase(f"test/{name}", fn)


def test_eager_exception_is_eager_fail_with_traceback():
    def forward(self, x):
        raise ValueError("boom")

    result, _ = run_ladder(_case(forward), "eager")
    assert (result["status"], result["stage"]) == ("eager_fail", "run")
    assert result["error"]["type"] == "ValueError"
    assert "boom" in result["error"]["traceback"]


def test_build_exception_is_build_fail():
    def broken(seed, size):
        raise ImportError("missing dependency")

    result, _ = run_ladder(FunctionCase("test/broken", broken), "eager")
    assert (result["status"], result["stage"]) == ("build_fail", "build")


def test_wrong_numbers_are_accuracy_fail_with_metrics():
    def forward(self, x):
        y = self.lin(x)
        # wrong only in compiled code: the reference and the CPU baseline stay right
        return y * 1.05 if torch.compiler.is_compiling() else y

    result, _ = run_ladder(_case(forward), "compile")
    assert (result["status"], result["stage"]) == ("accuracy_fail", "parity")
    assert result["metrics"]["parity_max_rel_err"] > 0.01
    assert "out" in result["findings"]["parity_failures"]


def test_skip_reason_is_data():
    case = FunctionCase("test/skipped", lambda seed, size: None, skip_reason="needs audio")
    result, stages = run_ladder(case, "eager")
    assert result["status"] == "skip" and result["error"]["message"] == "needs audio"
    assert stages == []
