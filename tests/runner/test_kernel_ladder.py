"""The kernel ladder on a tiny model with an RMSNorm of LlamaRMSNorm's arithmetic: every
verdict path (right, wrong fake, wrong backward, slower) in seconds, without transformers.
The suite itself (reduced llama, through the CLI) is in the slow test at the end."""

import importlib.util
import json
import os

import pytest
import torch

from tests.conftest import torchport
from torchport.cases.base import Size, Workload
from torchport.cases.kernels import KernelCase, Replacement, rms_norm_replacement
from torchport.config import RunConfig
from torchport.devices.cpu import CPUAdapter
from torchport.records.result import Result
from torchport.runner.kernels.ladder import KernelLadder


class TinyRMSNorm(torch.nn.Module):
    """transformers' LlamaRMSNorm, as it computes: float32 inside, scale after casting back."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)


def tiny_model(*, seed: int, size: Size) -> Workload:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), TinyRMSNorm(16), torch.nn.Linear(16, 16), TinyRMSNorm(16)
    )
    with torch.no_grad():
        for m in model:
            if isinstance(m, TinyRMSNorm):
                m.weight.normal_(1.0, 0.2)
    return Workload(
        model=model, args=(torch.randn(8, 6, 8),), loss_fn=lambda out: out.pow(2).mean()
    )


def tiny_case(variant: str) -> KernelCase:
    def make() -> Replacement:
        rep = rms_norm_replacement(variant)
        rep.target, rep.model = "TinyRMSNorm", tiny_model
        return rep

    return KernelCase(f"kernels/tiny_{variant}", make)


def run(variant: str, mode: str = "eager") -> dict:
    config = RunConfig(suite="kernels", device="cpu", modes=(mode,), perf_budget_s=0.2)
    result = KernelLadder(tiny_case(variant), mode, config, CPUAdapter(), lambda e: None, {}).run()
    Result.from_dict(result)  # the shape the store takes
    json.dumps(result)
    return result


def test_right_kernel_passes_every_check_and_is_timed():
    r = run("rms_norm")
    k, m = r["findings"]["kernel"], r["metrics"]
    assert r["status"] == "pass", r["error"]
    assert k["replaced"] == ["1", "3"]
    assert m["kernel_opcheck_failed"] == 0 and m["kernel_gradcheck_failed"] == 0
    assert m["kernel_samples_checked"] == 4 * 9 and m["kernel_samples_failed"] == 0
    # the op on every variant of its samples, every dtype, against the float64 truth
    assert m["kernel_op_values_checked"] >= 4 * 3 * 5 and m["kernel_op_values_failed"] == 0
    assert k["gradcheck"]["cpu"]["checked"] >= 3 * 5
    assert k["gradcheck"]["device"]["check"].startswith("the CPU gradcheck")
    # the whole model at the run's dtype, judged against the float64 truth
    assert k["model"]["dtype"] == "float32" and k["model"]["failed"] == 0
    assert k["model"]["truth"] == "the ORIGINAL model on the CPU in float64"
    # outputs, loss and every parameter's gradient were compared
    assert k["model"]["gradients"] == 6 and k["model"]["compared"] == 8
    assert m["kernel_step_speedup"] == pytest.approx(
        m["step_ms_original"] / m["step_ms_replacement"]
    )
    assert m["kernel_op_speedup"] > 0
    assert k["verdict"] in ("correct_faster", "correct_slower", "correct_noisy_timing")
    assert k["timing"]["step"]["original"]["n"] >= 10
    # the op alone in blocks of calls (sized in tests/probes/test_timing.py; one call when a
    # single call already lasts 10 ms, as on a loaded host), the whole step call by call
    calls = k["timing"]["op_calls_per_sample"]
    assert isinstance(calls, int) and calls >= 1
    assert k["timing"]["step_calls_per_sample"] == 1
    # the replaced step's figures, as compare and gate read them
    assert m["perf_median_ms"] == m["step_ms_replacement"]
    assert m["perf_samples"] == k["timing"]["step"]["replacement"]["n"]
    assert m["parity_max_rel_err"] == m["kernel_model_max_rel_err"] < 1e-3


def test_wrong_fake_fails_opcheck():
    r = run("rms_norm_bad_fake")
    assert (r["status"], r["stage"]) == ("eager_fail", "opcheck")
    assert r["findings"]["kernel"]["verdict"] == "opcheck_fail"
    assert "test_faketensor" in r["error"]["message"]
    assert r["findings"]["kernel"]["timing"].startswith("not timed")


def test_wrong_backward_fails_gradcheck_and_the_model_ab():
    r = run("rms_norm_bad_backward")
    k = r["findings"]["kernel"]
    assert (r["status"], r["stage"], k["verdict"]) == (
        "accuracy_fail",
        "gradcheck",
        "gradcheck_fail",
    )
    assert r["metrics"]["kernel_gradcheck_failed"] >= 3
    assert r["error"]["message"].startswith("gradcheck (float64, cpu) failed on sample 0")
    assert r["metrics"]["kernel_samples_failed"] > 0
    # the reference ran the ORIGINAL module: the wrong gradients show in the whole model too
    assert k["model"]["failed"] > 0
    assert all(f["name"].startswith("grad.") for f in k["model"]["failures"])
    assert r["metrics"]["kernel_model_max_rel_err"] > 1e-2


def test_slow_kernel_is_correct_and_its_slowdown_shown():
    r = run("rms_norm_slow")
    m = r["metrics"]
    assert r["status"] == "pass", r["error"]
    assert m["kernel_op_speedup"] < 1.0  # a Python loop over rows against one fused call
    assert r["findings"]["kernel"]["verdict"] in ("correct_slower", "correct_noisy_timing")


@pytest.mark.slow
def test_compile_mode_records_what_the_replacement_adds():
    """torch.compile of both sides (about 20 s on a loaded host)."""
    r = run("rms_norm", mode="compile")
    assert r["status"] == "pass", r["error"]
    report = r["findings"]["kernel"]["timing"]["compile"]
    assert report["original"]["graphs"] >= 1 and report["replacement"]["graphs"] >= 1
    for metric in ("kernel_graph_breaks_added", "kernel_recompiles_added", "kernel_graphs_added"):
        assert metric in r["metrics"]
    # judged at the run's dtype against the float64 truth
    assert r["findings"]["kernel"]["model"]["dtype"] == "float32"


def test_a_replacement_with_no_target_in_the_model_is_a_build_failure():
    def make():
        rep = rms_norm_replacement("rms_norm")
        rep.target, rep.model = "NoSuchNorm", tiny_model
        return rep

    config = RunConfig(suite="kernels", device="cpu", perf_budget_s=0.2)
    case = KernelCase("kernels/none", make)
    r = KernelLadder(case, "eager", config, CPUAdapter(), lambda e: None, {}).run()
    assert (r["status"], r["stage"]) == ("build_fail", "build")
    assert "NoSuchNorm" in r["error"]["message"]


def test_samples_cover_layouts_and_dtypes():
    from torchport.runner.kernels import variants as kernel_variants

    x = torch.randn(2, 3, 16)
    found = kernel_variants.from_module_input(x)
    names = [v.name for v in found]
    assert {"non_contiguous", "transposed", "sliced", "expanded", "odd_rows"} <= set(names)
    for var in found:
        (v,), _ = var.call_args(var.leaves(torch.float32, "cpu"))
        assert v.shape[-1] == 16
        if var.name in ("non_contiguous", "transposed", "expanded"):
            assert not v.is_contiguous(), var.name
        if var.name in ("as_given", "non_contiguous", "transposed", "sliced"):
            assert torch.equal(v.double(), x.float().double()), var.name  # values kept


def test_keyword_inputs_get_every_layout_and_keep_their_values():
    from torchport.runner.kernels import variants as kernel_variants

    h, cos = torch.randn(2, 5, 8), torch.randn(2, 5, 4)
    found = kernel_variants.variants((), {"hidden_states": h, "cos": cos, "flag": 3}, sizes=False)
    for var in found:
        _, kwargs = var.call_args(var.leaves(torch.float64, "cpu"))
        assert kwargs["flag"] == 3 and kwargs["hidden_states"].shape == h.shape
        if var.name == "non_contiguous":
            assert torch.equal(kwargs["hidden_states"], h.double())
            assert not kwargs["hidden_states"].is_contiguous()


@pytest.mark.slow
def test_kernels_suite_through_the_cli_gives_each_verdict(tmp_path):
    """``torchport run --suite kernels --device cpu`` in reduced llama (about 1.5 min)."""
    db = str(tmp_path / "kb.sqlite")
    ran = torchport(
        "run", "--suite", "kernels", "--device", "cpu", "--modes", "eager", "--db", db, timeout=900
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    shown = torchport("show", "--db", db, "--json", timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    body = json.loads(shown.stdout)
    got = {r["case"]: (r["status"], r["findings"]["kernel"]["verdict"]) for r in body["results"]}
    assert got["kernels/rms_norm"][0] == "pass"
    assert got["kernels/rms_norm_bad_fake"] == ("eager_fail", "opcheck_fail")
    assert got["kernels/rms_norm_bad_backward"] == ("accuracy_fail", "gradcheck_fail")
    assert got["kernels/rms_norm_slow"][0] == "pass"
    slow = next(r for r in body["results"] if r["case"] == "kernels/rms_norm_slow")
    assert slow["metrics"]["kernel_step_speedup"] < 1.0
    assert "kernels_fast_p" in body["views"]


def _run_workload(tmp_path, folder: str, target: str) -> dict:
    """The installed script run from the workload's own folder (relative to the checkout),
    with no PYTHONPATH, on the CPU in eager mode; its one result as ``show --json`` gives it."""
    here = os.path.join(os.path.dirname(__file__), "..", "..", folder)
    db = str(tmp_path / "kb.sqlite")
    ran = torchport(
        *("run", "--workload", target, "--device", "cpu", "--modes", "eager", "--db", db),
        cwd=os.path.abspath(here),
        env={"PYTHONPATH": ""},
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    shown = torchport("show", "--db", db, "--json", timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    (result,) = json.loads(shown.stdout)["results"]
    return result


@pytest.mark.slow
def test_a_replacement_from_a_workload_folder(tmp_path):
    """The README's example: the user's own custom op, run from its folder, no PYTHONPATH."""
    result = _run_workload(tmp_path, "docs/examples/kernel_workload", "my_rmsnorm:fused_rmsnorm")
    assert result["case"] == "workload/my_rmsnorm:fused_rmsnorm"
    assert result["status"] == "pass", result["error"]
    assert result["findings"]["kernel"]["model"]["failed"] == 0


def _side(median, p10, p90, noisy=("CV 40% > 10%",)):
    return {"median_ms": median, "p10_ms": p10, "p90_ms": p90, "noisy": list(noisy)}


def test_noisy_step_timing_is_decided_by_the_per_round_ratios_when_they_agree():
    config = RunConfig(suite="kernels", device="cpu")
    ladder = KernelLadder(tiny_case("rms_norm"), "eager", config, CPUAdapter(), print, {})
    overlapping = {"original": _side(100, 60, 160), "replacement": _side(200, 90, 300)}
    ladder.kernel["timing"] = {"step": overlapping}
    assert "noisy" not in ladder._step_noise() and "CV 40%" in ladder._step_noise()
    ladder.kernel["timing"]["step_paired"] = {"median": 0.5, "p10": 0.4, "p90": 0.7, "n": 10}
    assert ladder._step_noise() == ""  # every round: the replacement slower
    ladder.kernel["timing"]["step_paired"] = {"median": 0.9, "p10": 0.6, "p90": 1.2, "n": 10}
    assert "spans 1" in ladder._step_noise()
    quiet = {"original": _side(100, 98, 102, ()), "replacement": _side(101, 97, 104, ())}
    ladder.kernel["timing"] = {"step": quiet, "step_paired": {"p10": 0.9, "p90": 1.1}}
    assert ladder._step_noise() == ""  # not noisy: the medians decide


class PlainRMSNorm(torch.nn.Module):
    """A module-class replacement with no custom op: torch's own RMSNorm on the same weight."""

    def __init__(self, original):
        super().__init__()
        self.weight = original.weight
        self.eps = original.variance_epsilon

    def forward(self, x):
        return torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), None, self.eps).to(
            x.dtype
        ) * self.weight.to(x.dtype)


def test_a_module_class_replacement_and_an_op_named_through_torch_ops():
    config = RunConfig(suite="kernels", device="cpu", perf_budget_s=0.1)

    def plain():
        return Replacement(name="plain", target="TinyRMSNorm", make=PlainRMSNorm, model=tiny_model)

    r = KernelLadder(
        KernelCase("kernels/plain", plain), "eager", config, CPUAdapter(), lambda e: None, {}
    ).run()
    assert r["status"] == "pass", r["error"]
    assert "opcheck" not in r["findings"]["kernel"]  # no op: registration checks do not apply
    assert r["metrics"]["kernel_samples_checked"] == 4 * 9

    def by_name():
        rep = rms_norm_replacement("rms_norm_bad_fake")
        rep.op = torch.ops.torchport_kernels.rms_norm_bad_fake  # a packet from torch.ops
        rep.target, rep.model = "TinyRMSNorm", tiny_model
        return rep

    r = KernelLadder(
        KernelCase("kernels/by_name", by_name), "eager", config, CPUAdapter(), lambda e: None, {}
    ).run()
    assert (r["status"], r["stage"]) == ("eager_fail", "opcheck")


@torch.library.custom_op("torchport_test::cuda_only_rms_norm", mutates_args=(), device_types="cuda")
def _cuda_only_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


@_cuda_only_rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x)


def test_an_op_with_no_kernel_for_the_device_does_not_run_and_is_not_called_a_bad_registration():
    """A kernel written for another device (here CUDA only, run on the CPU): the plain call
    fails before opcheck, whose own instruments would otherwise fail first and read as a
    wrong registration (as on torchax, where SchemaCheckMode needs aten::as_strided_)."""
    from torchport.cases.kernels import fused_rms_norm_module, rms_norm_samples

    def make():
        return Replacement(
            name="cuda_only",
            target="TinyRMSNorm",
            make=fused_rms_norm_module(_cuda_only_rms_norm),
            op=_cuda_only_rms_norm,
            op_samples=rms_norm_samples,
            model=tiny_model,
        )

    config = RunConfig(suite="kernels", device="cpu", perf_budget_s=0.2)
    case = KernelCase("kernels/cuda_only", make)
    r = KernelLadder(case, "eager", config, CPUAdapter(), lambda e: None, {}).run()
    k = r["findings"]["kernel"]
    assert (r["status"], r["stage"], k["verdict"]) == ("eager_fail", "op_call", "does_not_run")
    assert r["error"]["message"].startswith("the op does not run on cpu (sample 0)")
    assert k["op_call"]["failed"] == k["op_call"]["checked"] == 3
    assert k["opcheck"].startswith("not run") and k["gradcheck"].startswith("not run")
    # later stages still record what they saw: the model with the op cannot run either
    assert k["timing"].startswith("not timed")
    Result.from_dict(r)
    json.dumps(r)


@pytest.mark.slow
def test_the_gpu_checks_triton_kernel_does_not_run_where_triton_cannot_and_says_why(tmp_path):
    """benchmarks/workloads/triton_rmsnorm.py (run on the H200 by the GPU check) imports
    without Triton; on the CPU the op cannot run: a result (``eager_fail @op_call``), not a
    crash of the tool, and never a wrong registration."""
    result = _run_workload(tmp_path, "benchmarks/workloads", "triton_rmsnorm:triton_rmsnorm")
    assert (result["status"], result["stage"]) == ("eager_fail", "op_call")
    if importlib.util.find_spec("triton") is None:
        assert "needs Triton" in result["error"]["message"]


def test_a_speed_verdict_needs_a_gap_beyond_noise_and_a_minimum_size():
    from torchport.runner.kernels.speed_verdict import gap_unclear

    quiet = {"original": _side(100, 98, 102, ()), "replacement": _side(99, 97, 101, ())}
    timing = {"step": quiet, "step_paired": {"p10": 0.97, "p90": 1.04}}
    assert "under the 5%" in gap_unclear(timing, 1.01)  # a 1 % gap under load: not "faster"
    # 10 % apart by the medians, but the rounds disagree and the ranges overlap
    wide = {"original": _side(110, 90, 130, ()), "replacement": _side(100, 85, 120, ())}
    timing = {"step": wide, "step_paired": {"p10": 0.9, "p90": 1.3}}
    assert "inside the noise" in gap_unclear(timing, 1.1)
    timing["step_paired"] = {"p10": 1.05, "p90": 1.15}  # every round faster by 10 %
    assert gap_unclear(timing, 1.1) == ""
    assert gap_unclear(None, 0.5) == ""  # untimed sides: the medians decide
