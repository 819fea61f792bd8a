"""Placement's instruments, each in its own pass: an instrument's failure is its own and keeps
what the other passes saw; an instrument the adapter says breaks the backend is skipped with
why; an op the recorders add to the backend's own accounting is not reported as the step's;
observing probes run after the timing and compile probes."""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import _get_current_dispatch_mode  # noqa: E402

from torchport.devices.base import DeviceAdapter  # noqa: E402
from torchport.probes import placement  # noqa: E402
from torchport.runner.ladders.model import run_order  # noqa: E402


class CountingAdapter(DeviceAdapter):
    """A backend that keeps op accounting (like torch_xla's counters): the step counts
    ``nonzero`` twice; under a dispatch recorder it also counts a scalar read, as torch_xla
    did for compiled llama and gpt2 under torchport's recorders."""

    name = torch_type = "counting"

    def __init__(self, *, breaks_under_profiler: bool = False, skips: dict | None = None):
        self.counts: Counter = Counter()
        self.breaks_under_profiler = breaks_under_profiler
        self.broken = False
        self.instrument_skips = skips or {}

    def start_fallback_tracking(self):
        self.counts.clear()

    def fallback_ops(self):
        return dict(self.counts)

    def synchronize(self):
        if self.broken:  # a backend left broken by the profiler (torch_xla, compiled)
            raise RuntimeError("ToLiteral() called on deleted or donated buffer")

    def step(self):
        out = torch.ones(2).relu()
        if _get_current_dispatch_mode() is not None:
            out.sum().item()  # the read the recorders cause, seen by the recorder too
        if self.breaks_under_profiler and torch.autograd.profiler._is_profiler_enabled:
            self.broken = True
        self.counts["aten::nonzero"] += 2
        if _get_current_dispatch_mode() is not None:
            self.counts["aten::_local_scalar_dense"] += 1
        return {"out": out}


def test_an_op_the_recorders_add_is_not_the_steps():
    adapter = CountingAdapter()
    result = placement.observe(adapter, adapter.step, "cpu")
    assert result.backend == {"aten::nonzero": 2}
    assert result.observer_effect["added_by_recorders"] == {"aten::_local_scalar_dense": 1}
    assert placement.scalar_reads(result) == {}  # no scalar read reported for the step
    assert not [op for op, _ in result.recording.ops if "_local_scalar_dense" in op]
    assert result.instruments["plain"]["status"] == "ok"


def test_a_failing_nested_pass_is_its_own_failure_and_keeps_the_recorders_evidence():
    adapter = CountingAdapter(breaks_under_profiler=True)
    result = placement.observe(adapter, adapter.step, "meta")
    nested = result.instruments["nested"]
    assert nested["status"] == "failed"
    assert "deleted or donated buffer" in nested["error"]  # the backend's own message
    assert result.instruments["recorders"]["status"] == "ok"
    assert result.backend == {"aten::nonzero": 2}  # counters already read are kept
    assert result.recording.ops  # and so is what the recorder saw


def test_an_instrument_the_adapter_says_breaks_it_is_skipped_with_the_reason():
    adapter = CountingAdapter(
        breaks_under_profiler=True,
        skips={"nested_profiler:compile": "the profiler deletes buffers"},
    )
    result = placement.observe(adapter, adapter.step, "meta", mode="compile")
    assert result.instruments["nested"] == {
        "status": "skipped",
        "reason": "the profiler deletes buffers",
    }
    assert "skipped" in placement.evidence(result, "meta", adapter)["nested"]
    # in eager mode the same adapter is observed by the profiler
    other = CountingAdapter(skips=adapter.instrument_skips)
    eager = placement.observe(other, other.step, "meta", mode="eager")
    assert eager.instruments["nested"]["status"] == "ok"


def test_a_failing_recorders_pass_is_the_probes_finding_not_the_cases():
    class Broken(CountingAdapter):
        def step(self):
            if _get_current_dispatch_mode() is not None:
                raise RuntimeError("the backend refuses the recorder")
            return super().step()

    adapter = Broken()
    with pytest.raises(placement.InstrumentFailed) as caught:
        placement.observe(adapter, adapter.step, "cpu")
    assert caught.value.instruments["recorders"]["status"] == "failed"
    assert "refuses the recorder" in caught.value.instruments["recorders"]["error"]
    assert caught.value.instruments["plain"]["status"] == "ok"  # the plain pass still ran


def test_observing_probes_run_after_the_timing_and_compile_probes():
    order = [name for name, _ in run_order(["placement", "perf", "profile", "compile"])]
    assert order == ["perf", "compile", "placement", "profile"]
