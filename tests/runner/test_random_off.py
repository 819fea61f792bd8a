"""A parity failure caused only by random numbers torchport does not control is no verdict: the
step is judged again with that randomness switched off (every module in eval mode), recorded,
and said in the text output; a real fault still fails with randomness off."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from torchport.cases.base import FunctionCase, Workload  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.runner.ladders.model import Ladder  # noqa: E402
from torchport.views.matrix import step_notes  # noqa: E402


class GaussianNoise(nn.Module):
    """A noise-injection layer, on in training only: ``torch.randn`` with a shape is a draw
    torchport does not make comparable (a float32 and a float64 draw from one seed differ, as a
    device's generator differs from the CPU's)."""

    def forward(self, x):
        if not self.training:
            return x
        return x + 0.5 * torch.randn(x.shape, dtype=x.dtype, device=x.device)


class NoisyNet(nn.Module):
    def __init__(self, wrong: bool):
        super().__init__()
        self.a, self.noise, self.b = nn.Linear(8, 16), GaussianNoise(), nn.Linear(16, 4)
        self.wrong = wrong

    def forward(self, x):
        y = self.b(torch.relu(self.noise(self.a(x))))
        if self.wrong and y.dtype == torch.float32:  # a fault of the run's dtype alone
            y = y * 1.05
        return y


def rrelu_case(wrong=False):
    def build(*, seed, size):
        torch.manual_seed(seed)
        return Workload(
            model=NoisyNet(wrong), args=(torch.randn(32, 8),), loss_fn=lambda o: o.pow(2).mean()
        )

    return FunctionCase("t/noise" + ("_wrong" if wrong else ""), build)


def run(case, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHPORT_REFERENCE_CACHE", str(tmp_path))
    config = RunConfig(device="cpu", probes=())
    return Ladder(case, "eager", config, CPUAdapter(), lambda e: None, {}).run()


def test_an_uncontrolled_draw_is_judged_with_its_randomness_off(monkeypatch, tmp_path):
    r = run(rrelu_case(), monkeypatch, tmp_path)
    assert r["status"] == "pass", r["error"]
    off = r["findings"]["randomness_off"]
    assert off["judged"] is True and off["ok"] is True
    assert off["uncontrolled"] == ["aten.randn"]
    assert "outside tolerance" in off["with_randomness"]  # it failed with the draws
    note = r["findings"]["parity"]["note"]
    assert note.startswith("judged with randomness switched off (every module in eval mode")
    # said in the text output (the results notes), not only in the JSON
    assert any(n.startswith("t/noise (eager): judged with randomness") for n in step_notes([r]))


def test_a_real_fault_still_fails_with_the_randomness_off(monkeypatch, tmp_path):
    r = run(rrelu_case(wrong=True), monkeypatch, tmp_path)
    assert (r["status"], r["stage"]) == ("accuracy_fail", "parity")
    off = r["findings"]["randomness_off"]
    assert off["judged"] is True and off["ok"] is False
    assert "judged with randomness switched off" in r["findings"]["parity"]["note"]


class AlwaysNoisy(nn.Module):
    """Noise that eval mode does not switch off: ``torch.randn`` with a shape and
    ``torch.rand_like``, drawn whatever ``self.training`` says."""

    def forward(self, x):
        noise = torch.randn(x.shape, dtype=x.dtype, device=x.device)
        return x + 0.5 * noise + 0.1 * torch.rand_like(x)


class AlwaysNoisyNet(NoisyNet):
    def __init__(self, wrong: bool):
        super().__init__(wrong)
        self.noise = AlwaysNoisy()


def always_noisy_case(wrong=False):
    def build(*, seed, size):
        torch.manual_seed(seed)
        return Workload(
            model=AlwaysNoisyNet(wrong),
            args=(torch.randn(32, 8),),
            loss_fn=lambda o: o.pow(2).mean(),
        )

    return FunctionCase("t/always_noisy" + ("_wrong" if wrong else ""), build)


def run_mode(case, mode, monkeypatch, tmp_path, backend="aot_eager"):
    monkeypatch.setenv("TORCHPORT_REFERENCE_CACHE", str(tmp_path))
    config = RunConfig(device="cpu", probes=(), compile_backend=backend, modes=(mode,))
    return Ladder(case, mode, config, CPUAdapter(), lambda e: None, {}).run()


@pytest.mark.parametrize(
    ("mode", "backend"),
    [
        ("eager", None),
        pytest.param("compile", "aot_eager", marks=pytest.mark.slow),  # ~25 s
        # Inductor with fallback_random: the graph's randn runs through the dispatcher
        pytest.param("compile", "inductor", marks=pytest.mark.slow),
    ],
)
def test_a_draw_eval_mode_leaves_is_drawn_on_the_cpu_and_judged(
    mode, backend, monkeypatch, tmp_path
):
    r = run_mode(always_noisy_case(), mode, monkeypatch, tmp_path, backend or "aot_eager")
    assert r["status"] == "pass", r["error"]
    off = r["findings"]["randomness_off"]
    assert off["judged"] is True and off["ok"] is True, off
    assert "aten.randn" in off["uncontrolled"][0]
    assert "outside tolerance" in off["with_randomness"]  # it failed with the draws
    assert off["drawn_on_cpu"] == {"aten.randn": 1}  # the randn each side drew on the CPU
    assert "drawn on the CPU" in off["how"]
    note = r["findings"]["parity"]["note"]
    assert note.startswith("judged with randomness switched off (every module in eval mode")
    assert any(
        n.startswith(f"t/always_noisy ({mode}): judged with randomness") for n in step_notes([r])
    )


def test_a_real_fault_fails_with_the_draws_made_on_the_cpu(monkeypatch, tmp_path):
    r = run_mode(always_noisy_case(wrong=True), "eager", monkeypatch, tmp_path)
    assert (r["status"], r["stage"]) == ("accuracy_fail", "parity")
    off = r["findings"]["randomness_off"]
    assert off["judged"] is True and off["ok"] is False
    assert off["drawn_on_cpu"] == {"aten.randn": 1}


def test_draws_the_two_sides_made_differently_are_not_judged(monkeypatch, tmp_path):
    """A draw a compiler lowered into its own graph never reaches the dispatcher: the device
    side then made fewer CPU draws than the reference, and the step is not judged on them."""
    from torchport.execution import reference as reference_mod

    obtain = reference_mod.obtain

    def fewer_on_the_device(spec, *args, **kwargs):
        got = obtain(spec, *args, **kwargs)
        if spec.random_off:  # as if the device's randn had stayed inside its graph
            got["randomness"]["drawn_on_cpu"] = {"aten.randn": 2}
        return got

    monkeypatch.setattr(reference_mod, "obtain", fewer_on_the_device)
    r = run_mode(always_noisy_case(), "eager", monkeypatch, tmp_path)
    assert (r["status"], r["stage"]) == ("accuracy_fail", "parity")
    off = r["findings"]["randomness_off"]
    assert off["judged"] is False
    assert "draws on the CPU differ: device {'aten.randn': 1}" in off["why_not"]
