"""Hot spots against the roofline: FLOPs and bytes per aten op, the ranking, the peaks, and
the probe on a tiny model (peaks given, and measured)."""

import pytest
import torch

from torchport.cases.base import Workload
from torchport.config import RunConfig
from torchport.devices.cpu import CPUAdapter
from torchport.execution.steps import make_step
from torchport.instruments import roofline
from torchport.probes import hotspots
from torchport.probes.base import Subject
from torchport.views import hotspots as hotspots_view


def test_op_costs_counts_matmul_flops_and_bytes():
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    costs = roofline.op_costs(lambda: (a @ b).t(), "cpu")
    mm = costs["aten::mm"]
    assert mm["calls"] == 1
    assert mm["flops"] == 2 * 8 * 16 * 4
    assert mm["bytes"] == 4 * (8 * 16 + 16 * 4 + 8 * 4)  # two inputs read, one output written
    assert costs["aten::t"]["bytes"] == 0  # a view moves nothing
    assert not mm.get("host_calls")


def test_op_costs_marks_host_inputs_when_the_target_is_a_device():
    x = torch.randn(4, 4)
    costs = roofline.op_costs(lambda: x.sin(), "cuda")  # the op ran on the host
    assert costs["aten::sin"]["host_calls"] == 1


def test_rank_orders_by_the_time_a_roofline_kernel_saves():
    peak = {"tflops": 1.0, "gbps": 100.0}  # ridge 10 FLOP/byte
    costs = {
        "aten::mm": {"calls": 1, "flops": 2e9, "bytes": 1e7},  # AI 200: compute-bound
        "aten::add": {"calls": 1, "flops": 0, "bytes": 1e8},  # memory-bound
        "aten::view": {"calls": 3, "flops": 0, "bytes": 0},
    }
    times = {
        "aten::mm": {"self_ms": 4.0, "calls": 1},  # roofline 2 ms: saves 2 ms
        "aten::add": {"self_ms": 5.0, "calls": 1},  # roofline 1 ms: saves 4 ms
        "aten::view": {"self_ms": 0.1, "calls": 3},
        "aten::linear": {"self_ms": 0.5, "calls": 1},  # composite: not counted
    }
    rows = hotspots.rank(costs, times, step_ms=10.0, peak=peak)
    assert [r["op"] for r in rows] == ["aten::add", "aten::mm", "aten::view", "aten::linear"]
    add, mm = rows[0], rows[1]
    assert add["bound"] == "memory" and mm["bound"] == "compute"
    assert mm["roofline_ms"] == pytest.approx(2.0) and mm["saving_ms"] == pytest.approx(2.0)
    assert mm["pct_of_roofline"] == pytest.approx(0.5) and mm["share"] == pytest.approx(0.4)
    assert mm["achieved_tflops"] == pytest.approx(0.5)
    assert add["achieved_gbps"] == pytest.approx(20.0)
    assert rows[2]["bound"] == "overhead"
    assert rows[3]["bound"] is None and rows[3]["saving_ms"] is None


def test_peaks_from_flags_else_measured():
    adapter = CPUAdapter()
    given = roofline.peaks(RunConfig(peak_tflops=2.0, peak_gbps=50.0), adapter, torch.float32)
    assert given == {
        "tflops": 2.0,
        "gbps": 50.0,
        "tflops_from": "--peak-tflops",
        "gbps_from": "--peak-gbps",
    }
    measured = roofline.peaks(RunConfig(), adapter, torch.float32)
    assert measured["tflops"] > 0 and measured["gbps"] > 0
    assert measured["tflops_from"].startswith("measured")


def tiny_subject(mode="eager", **config) -> Subject:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    workload = Workload(model=model, args=(torch.randn(16, 32),), loss_fn=lambda o: o.sum())
    step = make_step(model, model, workload)
    return Subject(
        case=None,  # type: ignore[arg-type]
        mode=mode,
        config=RunConfig(**config),
        adapter=CPUAdapter(),
        device="cpu",
        dtype=torch.float32,
        workload=workload,
        model=model,
        runner=model,
        step=step,
        make_runner=lambda: model,
    )


def test_probe_ranks_ops_of_a_step_and_the_view_shows_them():
    report = hotspots.HotspotsProbe().safe_run(tiny_subject(peak_tflops=0.05, peak_gbps=5.0))
    assert report.error is None, report.error
    info = report.findings["hotspots"]
    ops = {r["op"]: r for r in info["ops"]}
    assert ops["aten::addmm"]["flops"] == 2 * 16 * 32 * 64 + 2 * 16 * 64 * 8  # forward
    savings = [r["saving_ms"] for r in info["ops"] if r["saving_ms"] is not None]
    assert savings == sorted(savings, reverse=True)
    assert sum(r["share"] for r in info["ops"]) <= 1.0 + 1e-6  # same window, no double count
    result = {"case": "tiny", "mode": "eager", "findings": report.findings}
    view = hotspots_view.build({}, [result])
    assert view is not None and view.rows[0][2] == info["ops"][0]["op"]
    # per innermost module: the two Linear layers hold the matmuls (forward and backward)
    by_module = {m["op"]: m for m in info["modules"]}
    assert {"Sequential.0", "Sequential.2"} <= set(by_module)
    assert by_module["Sequential.0"]["flops"] == 2 * 16 * 32 * 64 + 2 * 16 * 32 * 64  # fwd, dW
    assert by_module["Sequential.2"]["flops"] == 3 * 2 * 16 * 64 * 8  # fwd, dX, dW
    assert sum(m["share"] for m in info["modules"]) == pytest.approx(1.0)
    assert hotspots_view.modules({}, [result]).rows[0][2] == info["modules"][0]["op"]
    assert hotspots_view.build({}, [{"case": "x", "mode": "eager", "findings": {}}]) is None


def test_probe_in_compile_mode_says_it_profiles_the_eager_step():
    report = hotspots.HotspotsProbe().safe_run(
        tiny_subject("compile", peak_tflops=0.05, peak_gbps=5.0)
    )
    assert any("eager step" in n for n in report.findings["hotspots"]["notes"])


def test_a_bad_peak_is_refused_with_the_flag_named():
    from torchport.config import ConfigError

    with pytest.raises(ConfigError, match="--peak-gbps must be a positive, finite number"):
        RunConfig(peak_gbps=-1.0)
