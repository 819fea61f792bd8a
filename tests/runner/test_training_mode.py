"""Training steps in training mode with parity that can fail: BatchNorm and dropout pass on the
CPU and on simdev without false alarms; a float32-only 1% gradient error fails on the CPU; the
HF reference loss is float64-deep; step kind and mode are in every result."""

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import torchport  # noqa: E402
from tests.probes.test_placement import run_child  # noqa: E402
from torchport.cases.registry import find_case  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.runner.ladders.model import Ladder  # noqa: E402


def ladder(suite, case, mode):
    config = RunConfig(device="cpu", probes=())
    return Ladder(find_case(suite, case), mode, config, CPUAdapter(), lambda e: None, {}).run()


@pytest.mark.parametrize("mode", ["eager", pytest.param("compile", marks=pytest.mark.slow)])
def test_batchnorm_and_dropout_pass_on_the_cpu_in_train_mode(mode):
    r = ladder("smoke", "smoke/bnnet", mode)
    assert r["status"] == "pass", r["error"]
    step = r["findings"]["step"]
    assert (step["kind"], step["mode"]) == ("training forward+backward", "train")
    randomness = step["randomness"]
    assert randomness["method"] == "cpu-masks" and randomness["masked_dropout_calls"] == 2
    assert randomness["uncontrolled_random_ops"] == {}
    # running statistics were updated by the step, and compared
    assert randomness["compared_buffers"] == [
        "buffer.1.running_mean",
        "buffer.1.running_var",
        "buffer.5.running_mean",
        "buffer.5.running_var",
    ]
    basis = r["findings"]["parity"]["basis"]
    assert basis == ("baseline" if mode == "eager" else "device")


def test_a_float32_only_gradient_error_fails_on_the_cpu():
    r = ladder("planted", "planted/fp32_grad_error", "eager")
    assert (r["status"], r["stage"]) == ("accuracy_fail", "parity")
    parity = r["findings"]["parity"]
    assert parity["basis"] == "baseline" and parity["failing"] == 2
    worst = parity["worst"][0]
    assert worst["name"].startswith("grad.linear.")
    assert worst["max_rel_err"] == pytest.approx(0.01, rel=1e-3)
    assert worst["rmse_ratio"] == pytest.approx(1.0)  # the CPU float32 run is the result
    assert "grad.linear." in r["error"]["message"] and "rel err 0.01" in r["error"]["message"]


def test_hf_reference_loss_is_float64_deep():
    from torchport.cases.base import Size
    from torchport.execution.build import build_workload
    from torchport.execution.steps import place

    workload = build_workload(find_case("smoke", "hf/llama"), seed=0, size=Size())
    assert workload.meta["reference_loss"].startswith("float64 from float64 logits")
    ref = place(workload, "cpu", torch.float64)
    out = ref.model(**ref.kwargs)
    assert out.loss.dtype == torch.float64
    # the same loss as transformers' own in float32, to float32 precision
    f32 = place(workload, "cpu", torch.float32)
    assert out.loss.item() == pytest.approx(f32.model(**f32.kwargs).loss.item(), rel=1e-5)


SIMDEV_BN = r"""
import json, warnings
warnings.simplefilter("ignore")
from torchport.cases.registry import find_case
from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.runner.ladders.model import Ladder
adapter = get_adapter("simdev")
adapter.prepare()
config = RunConfig(device="simdev", probes=("placement",))
case = find_case("smoke", "smoke/bnnet")
print(json.dumps({m: Ladder(case, m, config, adapter, lambda e: None, {}).run()
                  for m in MODES}, default=str))
"""


@pytest.mark.parametrize("modes", [("eager",), pytest.param(("compile",), marks=pytest.mark.slow)])
def test_batchnorm_and_dropout_pass_on_simdev_in_train_mode(modes):
    out = run_child(f"MODES = {modes!r}\n" + SIMDEV_BN)
    for mode, r in out.items():
        assert (r["status"], r["grade"]) == ("pass", "on_device"), (mode, r["error"])
        assert r["findings"]["step"]["randomness"]["masked_dropout_calls"] == 2
        # the placement pass ran the device's own training kernels (dropout, batch norm)
        ops = {o["op"] for o in r["findings"]["ops"] if o["device"] == "simdev"}
        assert {"aten.native_dropout.default", "aten.native_batch_norm.default"} <= ops


@pytest.mark.slow
def test_cpu_fp32_grad_error_from_the_command_line(tmp_path):
    proc = torchport(
        "run",
        "--suite",
        "planted",
        "--cases",
        "fp32_grad_error",
        "--modes",
        "eager",
        "--device",
        "cpu",
        "--probes",
        "none",
        "--db",
        tmp_path / "kb.db",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "accuracy_fail" in proc.stdout and "grad.linear" in proc.stdout
