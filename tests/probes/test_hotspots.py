"""Hot spots against the roofline: FLOPs and bytes per aten op, the ranking, the peaks, and
the probe on a tiny model (peaks given, and measured)."""

import dataclasses
import statistics

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


# --- stability: four identical blocks, and a block with injected work --------------------------

BURNS: dict[str, int] = {"calls": 0}


@torch.library.custom_op("torchport_test_hotspots::burn", mutates_args=())
def _burn(x: torch.Tensor, us: int, every_other: bool) -> torch.Tensor:
    """Spends ``us`` microseconds of this thread's CPU time inside one op call (every other
    call only, when ``every_other``): work the hot-spot passes must see, or see as jitter."""
    import time

    if every_other:  # only the calls that may skip count, so the parity alternates
        BURNS["calls"] += 1
    if us and (not every_other or BURNS["calls"] % 2):
        end = time.thread_time() + us / 1e6
        while time.thread_time() < end:
            pass
    return x.clone()


@_burn.register_fake
def _(x, us, every_other):
    return torch.empty_like(x)


class Block(torch.nn.Module):
    def __init__(self, dim: int, burn_us: int | None = None, every_other: bool = False):
        """``burn_us`` None: no burn op at all (a custom op's first call imports torch._dynamo,
        seconds on a loaded host); 0: the op, burning nothing."""
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(4 * dim, dim)
        self.register_buffer("probe", torch.zeros(4))
        self.burn_us, self.every_other = burn_us, every_other  # not parameters: same structure

    def forward(self, x):
        if self.burn_us is not None:
            torch.ops.torchport_test_hotspots.burn(self.probe, self.burn_us, self.every_other)
        return x + self.down(self.act(self.up(self.norm(x))))


def four_blocks_subject(burns: dict[int, tuple[int, bool]] | None = None) -> Subject:
    """Stem, four identical blocks, head; ``burns``: {block index: (us, every_other)}."""
    torch.manual_seed(0)
    dim = 128
    none = (0, False) if burns else (None, False)  # every block calls the op, or none does
    blocks = [Block(dim, *(burns or {}).get(i, none)) for i in range(4)]
    model = torch.nn.Sequential(torch.nn.Linear(32, dim), *blocks, torch.nn.Linear(dim, 10))
    workload = Workload(
        model=model, args=(torch.randn(128, 32),), loss_fn=lambda o: o.square().mean()
    )
    return Subject(
        case=None,  # type: ignore[arg-type]
        mode="eager",
        config=RunConfig(peak_tflops=0.05, peak_gbps=5.0),
        adapter=CPUAdapter(),
        device="cpu",
        dtype=torch.float32,
        workload=workload,
        model=model,
        runner=model,
        step=make_step(model, model, workload),
        make_runner=lambda: model,
    )


def module_shares(info: dict) -> dict[str, float]:
    return {m["op"]: m["share"] for m in info["modules"]}


def test_four_identical_blocks_agree_within_a_run_and_run_to_run_twice(monkeypatch):
    """The acceptance of issue 43's hot spots: identical blocks' shares within 1.5x of each
    other in a run, and each module's share within 1.5x from one run to the next."""
    # the step at the user's thread count is not what this checks (on a loaded host each such
    # step waits for its threads: the slowest part of the probe)
    monkeypatch.setattr(hotspots, "TIMED_STEPS", 1)
    subject = four_blocks_subject()
    runs = []
    for _ in range(2):
        report = hotspots.HotspotsProbe().safe_run(subject)
        assert report.error is None, report.error
        info = report.findings["hotspots"]
        check = info["self_check"]
        judged = [g for g in check["groups"] if g["judged"]]
        # up, act and down of blocks 1-4 (norm sits near the 1 % floor: judged in some runs)
        assert {g["modules"][0].rsplit(".", 1)[1] for g in judged} >= {
            "up",
            "act",
            "down",
        }
        assert all(len(g["modules"]) == 4 for g in judged)
        assert info["stable"], check["reason"]
        # the blocks' big parts (2-10 % of the pass) within 1.5x outright, beyond the noise rule
        big = [g for g in judged if statistics.median(g["shares"]) >= 0.02]
        assert big and max(g["ratio"] for g in big) <= hotspots.IDENTICAL_FACTOR, big
        assert info["cost"]["instrumented_x"] > 0 and info["cost"]["steps"] == hotspots.STEPS
        assert any(n.startswith("cost of measuring") for n in info["notes"])
        runs.append(module_shares(info))
    first, second = runs
    for name in [n for n in first if n.endswith((".up", ".down"))]:
        ratio = max(first[name], second[name]) / min(first[name], second[name])
        assert ratio <= hotspots.IDENTICAL_FACTOR, (name, first[name], second[name])


def test_the_self_check_names_a_block_doing_more_work_and_jitter_is_flagged_unstable(
    monkeypatch,
):
    """The third block (Sequential.3) burns 3 ms of CPU in every step: the four blocks are no
    longer alike, and the self-check names it. The fourth (Sequential.4) burns 3 ms every
    other call: its share moves from step to step, and its row is flagged unstable."""
    monkeypatch.setattr(hotspots, "TIMED_STEPS", 1)
    torch.manual_seed(0)
    report = hotspots.HotspotsProbe().safe_run(
        four_blocks_subject({2: (3000, False), 3: (3000, True)})
    )
    assert report.error is None, report.error
    info = report.findings["hotspots"]
    assert not info["stable"]
    reason = info["self_check"]["reason"]
    assert "Sequential.3 measured" in reason and "more than 1.5x" in reason, reason
    rows = {m["op"]: m for m in info["modules"]}
    jittery = rows["Sequential.4"]
    assert jittery["spread"] > hotspots.UNSTABLE_SPREAD and jittery["unstable"]
    steady = [r for name, r in rows.items() if name.endswith(".up")]
    assert steady and not any(r["unstable"] for r in steady)
    result = {"case": "four", "mode": "eager", "findings": report.findings}
    view = hotspots_view.modules({}, [result])
    assert view is not None and any("profile UNSTABLE" in n for n in view.notes)
    noise = view.names.index("noise")
    for row in view.rows:
        assert (row[noise] == "unstable") == rows[row[2]]["unstable"]


def test_on_a_device_the_op_table_comes_from_profiled_steps_and_modules_from_the_host_clock(
    monkeypatch,
):
    monkeypatch.setattr(hotspots, "PROFILED_STEPS", 3)  # the path, not the statistics
    monkeypatch.setattr(hotspots, "STEPS", 3)

    class OtherDevice(CPUAdapter):  # a target that is not the CPU (its work still runs here)
        torch_type = "otherdev"

    subject = tiny_subject(peak_tflops=0.05, peak_gbps=5.0)
    subject = dataclasses.replace(subject, adapter=OtherDevice())
    report = hotspots.HotspotsProbe().safe_run(subject)
    assert report.error is None, report.error
    info = report.findings["hotspots"]
    assert info["share_of"].startswith("the profiled step")
    assert info["cost"]["profiled_ms"] > 0 and "profiled step" in info["notes"][0]
    assert "host clock" in info["modules_time"]
    assert "intra-op thread" not in info["load"]  # threads are left alone off the CPU
    ops = {r["op"]: r for r in info["ops"]}
    assert ops["aten::addmm"]["share"] > 0 and ops["aten::addmm"]["spread"] is not None
    assert sum(r["share"] for r in info["ops"]) <= 1.0 + 1e-6  # of the profiled step


def test_profiled_calls_are_keyed_per_call_over_the_steps():
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    calls, windows_s, kind = hotspots.profile_calls(lambda: (a @ b) @ b.t(), lambda: None, "cpu", 3)
    assert calls.steps == 3 and len(windows_s) == 3 and kind == "self CPU time inside the op"
    mm = [k for k in calls.keys if k[1] == "aten::mm"]
    assert len(mm) == 2 and all(len(calls.samples[k]) == 3 for k in mm)


def test_peaks_measured_by_the_clock_the_ops_are_read_with(monkeypatch):
    from torchport.timing import thread_clock

    monkeypatch.setattr(roofline, "MATMUL_N", 128)  # the clock's path, not the peak
    monkeypatch.setattr(roofline, "COPY_BYTES", 2**20)
    found = roofline.measured_peaks(CPUAdapter(), torch.float32, thread_clock)
    assert found["tflops"] > 0 and found["tflops_from"].endswith("the thread's CPU time")


def _row(share: float, p10: float, p90: float) -> dict:
    return {"share": share, "share_p10": p10, "share_p90": p90}


def test_the_self_check_fails_a_bias_beyond_the_spread_not_a_noisy_reading():
    """Four identical modules: one reading 1.6x its twin with overlapping p10-p90 intervals
    (the host's noise in a few steps) agrees; the same ratio with intervals apart (a bias in
    every resample) fails and is named; a group whose largest share is under the floor is not
    judged."""
    names = [f"m.{i}.lin" for i in range(4)]
    noisy = dict(zip(names, [_row(0.05, 0.045, 0.055)] * 3 + [_row(0.08, 0.05, 0.11)], strict=True))
    check = hotspots.self_check([names], noisy)
    (group,) = check["groups"]
    assert check["stable"] and group["judged"] and not group["apart"] and group["agree"]
    assert "only within their p10-p90" in hotspots._check_note(check)

    biased = dict(
        zip(names, [_row(0.05, 0.045, 0.055)] * 3 + [_row(0.08, 0.075, 0.085)], strict=True)
    )
    check = hotspots.self_check([names], biased)
    assert not check["stable"] and check["groups"][0]["apart"]
    assert "m.3.lin measured 8.0%" in check["reason"] and "beyond both rows'" in check["reason"]

    small = dict(
        zip(names, [_row(0.004, 0.003, 0.005)] * 3 + [_row(0.009, 0.0085, 0.0095)], strict=True)
    )
    check = hotspots.self_check([names], small)
    assert check["stable"] and not check["groups"][0]["judged"]
    # without intervals (one step) a ratio beyond the factor is a disagreement, as before
    bare = {n: {"share": r["share"]} for n, r in biased.items()}
    assert not hotspots.self_check([names], bare)["stable"]
