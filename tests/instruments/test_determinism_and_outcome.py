"""Two eager runs compared (noise feeds the allowance, beyond the ceiling is a finding);
a compile with no graph reaching the backend is not a pass; scalar reads are transfers."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from torchport.cases.registry import find_case  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices import signals  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.instruments import compile_outcome, determinism, parity  # noqa: E402
from torchport.instruments import dispatch_recorder as rec  # noqa: E402
from torchport.probes.placement import PassResult, op_table, scalar_reads  # noqa: E402
from torchport.runner.ladders.model import Ladder  # noqa: E402


@pytest.fixture(autouse=True)
def forget_skipped_frames():
    """Dynamo remembers code objects it skipped; later tests in this process compile them."""
    yield
    torch._dynamo.reset()


def test_identical_runs_are_deterministic():
    a = {"out": torch.randn(8, 8)}
    found = determinism.compare_runs(a, {"out": a["out"].clone()}, "float32")
    assert found["summary"]["identical"] and not found["summary"]["beyond_ceiling"]
    assert found["noise_rmse"] == {"out": 0.0}


def test_runs_that_disagree_beyond_the_ceiling_get_a_finding():
    a = torch.randn(64)
    found = determinism.compare_runs({"out": a}, {"out": a * (1 + 1e-3)}, "float32")
    summary = found["summary"]
    assert summary["beyond_ceiling"] and summary["worst_tensor"] == "out"
    assert "two eager runs on the device disagree beyond the float32 ceiling" in summary["finding"]


def test_the_devices_own_noise_feeds_the_parity_allowance():
    ref = torch.randn(256, dtype=torch.float64)
    base = ref.float()
    result = (ref + 3e-4 * torch.randn(256, dtype=torch.float64)).float()  # device noise
    args = dict(atol=1e-6, rtol=1e-6, low_precision=False)
    assert not parity.compare({"t": result}, {"t": ref}, {"t": base}, **args).ok
    noise = {"t": 6e-4}  # two eager runs of this device differ by that much (under the
    #                       float32 ceiling, which no allowance exceeds)
    assert parity.compare({"t": result}, {"t": ref}, {"t": base}, noise=noise, **args).ok


class NonInfraMode(TorchDispatchMode):  # like torchax's global dispatch mode
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_dynamo_skipping_every_frame_is_not_compiled():
    torch._dynamo.reset()

    def fn(x):
        return torch.sin(x) + 1

    compiled = torch.compile(fn, backend="eager")
    with NonInfraMode(), compile_outcome.watch() as outcome:
        compiled(torch.randn(4))
    assert outcome.graphs == 0 and outcome.compiled is False
    assert outcome.reason() == (
        "not compiled: all frames skipped (dynamo: non-infra torch "
        "dispatch mode present, this is not supported today in "
        "torch.compile)"
    )

    def other(x):  # dynamo remembers a skipped code object: a fresh one compiles
        return torch.cos(x) + 1

    with compile_outcome.watch() as outcome:
        torch.compile(other, backend="eager")(torch.randn(4))
    assert outcome.graphs == 1 and outcome.compiled


def test_the_ladder_records_compile_fail_when_nothing_was_compiled():
    config = RunConfig(device="cpu", compile_backend="eager", modes=("compile",))
    with torch._dynamo.config.patch(disable=True):  # dynamo traces nothing
        out = Ladder(
            find_case("smoke", "smoke/mlp"), "compile", config, CPUAdapter(), lambda e: None, {}
        ).run()
    assert out["status"] == "compile_fail" and out["stage"] == "compile"
    assert out["error"]["type"] == "NotCompiled"
    assert out["error"]["message"].startswith("not compiled:")
    assert out["findings"]["compile_outcome"]["graphs_to_backend"] == 0
    assert "determinism" in out["findings"] and out["findings"]["sync_method"]


def test_a_scalar_read_the_backend_counts_is_a_transfer(monkeypatch):
    monkeypatch.setattr(signals, "_HEARD", signals.Messages())
    recording = rec.Recording()
    recording.ops[("aten.nonzero.default", "xla")] = 10
    recording.ops[("aten.add.Tensor", "xla")] = 30
    recording.add_copy("aten._local_scalar_dense.default", "xla", "cpu", 4)
    result = PassResult(
        recording=recording,
        messages=signals.Messages(),
        backend={"aten::nonzero": 10, "aten::_local_scalar_dense": 32},
    )
    rows = op_table(result, "xla")
    fallback = {r["op"]: r["count"] for r in rows if r["fallback"]}
    assert fallback == {"aten.nonzero.default": 10}
    assert scalar_reads(result) == {"aten::_local_scalar_dense": 32}
