"""timing: synchronised clock reads, interleaved sampling, order statistics."""

import statistics

import pytest

from tests.probes.perf_helpers import RecordingAdapter
from torchport import timing
from torchport.devices.cpu import CPUAdapter
from torchport.timing import (
    StepTimer,
    Summary,
    calls_per_block,
    round_order,
    sample_blocked,
    sample_interleaved,
    step_timer,
)


def test_timed_synchronises_before_and_after_the_call():
    log = []
    value, seconds = StepTimer(lambda: log.append("sync"))(lambda: log.append("work") or 7)
    assert value == 7 and seconds >= 0
    assert log == ["sync", "work", "sync"]


def test_step_timer_uses_the_adapters_synchronize():
    adapter = RecordingAdapter()
    timer = step_timer(adapter)
    timer(lambda: adapter.log.append("work"))
    assert adapter.log == ["sync", "work", "sync"]


def test_cuda_adapter_without_a_gpu_falls_back_to_the_host_clock(monkeypatch):
    import torch

    adapter = RecordingAdapter()
    adapter.torch_type = "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    timer = step_timer(adapter)
    assert type(timer) is StepTimer
    timer(lambda: None)
    assert adapter.log == ["sync", "sync"]


def test_rounds_alternate_which_side_goes_first():
    assert round_order(["eager", "compiled"], 0) == ["eager", "compiled"]
    assert round_order(["eager", "compiled"], 1) == ["compiled", "eager"]


class FakeClock:
    """Advances by a fixed step on every read: sampling becomes deterministic."""

    def __init__(self, step_s):
        self.now, self.step_s = 0.0, step_s

    def __call__(self):
        self.now += self.step_s
        return self.now


def test_interleaved_sampling_order_and_counts(monkeypatch):
    monkeypatch.setattr(timing, "clock", FakeClock(0.001))
    calls = []
    sides = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    spent: dict = {}
    samples = sample_interleaved(
        sides,
        StepTimer(),
        budget_s=0.0,
        warmup=2,
        min_samples=4,
        warmup_budget_s=0.0,
        record=spent,
    )
    assert spent["warmup_rounds"] == 2 and spent["timed_rounds"] == 4
    assert 0 < spent["warmup_s"] < spent["timed_s"]  # what was spent, as the clock read it
    # 2 warm-up rounds, then 4 timed rounds, every round in alternating order (ABBA...)
    assert calls == ["a", "b", "b", "a"] + ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert len(samples["a"]) == len(samples["b"]) == 4
    assert all(s == pytest.approx(0.001) for s in samples["a"])


def test_sampling_stops_when_the_budget_is_spent(monkeypatch):
    monkeypatch.setattr(timing, "clock", FakeClock(0.01))
    samples = sample_interleaved(
        {"a": lambda: None, "b": lambda: None},
        StepTimer(),
        budget_s=0.5,
        warmup=1,
        min_samples=3,
        warmup_budget_s=0.0,
    )
    # each timed call reads the clock twice and the loop once per round: ~0.05 s per round,
    # so the 2 * 0.5 s budget ends after about 20 rounds; far from the max of 1000
    assert 15 <= len(samples["a"]) <= 25


def test_sampling_respects_max_samples(monkeypatch):
    monkeypatch.setattr(timing, "clock", FakeClock(1e-9))
    samples = sample_interleaved(
        {"a": lambda: None},
        StepTimer(),
        budget_s=10.0,
        warmup=1,
        max_samples=7,
        warmup_budget_s=0.0,
    )
    assert len(samples["a"]) == 7


class WorkClock:
    """A clock that moves only when a side's call does its (simulated) work."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def work(self, seconds: float):
        def call():
            self.now += seconds

        return call


def test_short_calls_are_timed_in_blocks_sized_by_the_slowest_side(monkeypatch):
    clock = WorkClock()
    monkeypatch.setattr(timing, "clock", clock)
    sides = {"fast": clock.work(0.001), "slow": clock.work(0.003)}
    # the slow side's block: 1 call 3 ms, 2 calls 6 ms, 4 calls 12 ms >= 10 ms
    assert calls_per_block(sides, StepTimer(), min_block_s=0.01) == 4
    samples, calls = sample_blocked(sides, StepTimer(), budget_s=0.0, min_samples=5)
    assert calls == 4
    assert len(samples["fast"]) == len(samples["slow"]) == 5
    # each sample is the block's time per call, not the block's time
    assert all(s == pytest.approx(0.001) for s in samples["fast"])
    assert all(s == pytest.approx(0.003) for s in samples["slow"])


def test_calls_already_long_are_timed_one_by_one(monkeypatch):
    clock = WorkClock()
    monkeypatch.setattr(timing, "clock", clock)
    assert calls_per_block({"a": clock.work(0.05)}, StepTimer(), min_block_s=0.01) == 1
    assert calls_per_block({"a": clock.work(0.0)}, StepTimer(), max_calls=64) == 64


def test_a_backend_that_defers_ops_is_timed_one_synchronised_call_a_sample(monkeypatch):
    clock = WorkClock()
    monkeypatch.setattr(timing, "clock", clock)
    calls = []
    work = clock.work(0.001)

    def call():
        calls.append(1)
        work()

    samples, per_sample = sample_blocked(
        {"a": call}, StepTimer(defers_ops=True), budget_s=0.0, min_samples=2
    )
    # no blocks (a lazy backend would fuse them, or drop the calls whose outputs died)
    assert per_sample == 1 and len(calls) == 3 + 2
    assert samples["a"] == [pytest.approx(0.001)] * 2


def test_step_timer_takes_the_adapters_deferral():
    class Lazy:
        defers_ops = True

        def synchronize(self):
            pass

    assert step_timer(Lazy()).defers_ops and not step_timer(CPUAdapter()).defers_ops


def test_summary_of_known_samples():
    samples = [float(x) for x in range(1, 11)]  # 1..10 s, shuffled order must not matter
    s = Summary.of(list(reversed(samples)))
    assert s.n == 10 and s.median_s == 5.5 and s.min_s == 1.0 and s.mean_s == 5.5
    assert s.p10_s == pytest.approx(1.9) and s.p90_s == pytest.approx(9.1)
    assert s.cv == pytest.approx(statistics.stdev(samples) / 5.5)


def test_summary_of_one_sample_and_none():
    s = Summary.of([0.25])
    assert (s.median_s, s.p10_s, s.p90_s, s.cv) == (0.25, 0.25, 0.25, 0.0)
    with pytest.raises(ValueError):
        Summary.of([])


class _Event:
    """Stands in for torch.cuda.Event: records its place in the log."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def record(self):
        self.log.append(f"record {self.name}")

    def synchronize(self):
        self.log.append(f"wait {self.name}")

    def elapsed_time(self, other):
        return 5.0  # ms


@pytest.mark.parametrize("steady", [False, True])
def test_cuda_event_timer_launches_the_timed_call_behind_an_untimed_one_when_steady(
    monkeypatch, steady
):
    import torch

    log: list[str] = []
    names = iter(["start", "end"])
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing: _Event(log, next(names)))
    timer = timing.CudaEventTimer(lambda: log.append("sync"), steady=steady)
    value, seconds = timer(lambda: log.append("call") or log.count("call"))
    untimed = ["call"] if steady else []  # after the synchronisation, before the start event
    assert log == ["sync", *untimed, "record start", "call", "record end", "wait end"]
    assert value == 1 + len(untimed) and seconds == 0.005  # the timed call's value
    assert ("steady" in timer.kind) is steady
