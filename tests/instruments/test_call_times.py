"""Per-call times over several steps: the robust per-call statistic, the bootstrap spread, the
regrouping per op, and which modules count as structurally identical."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchport.instruments import call_times
from torchport.instruments.call_times import CallSamples, summarise


def samples(steps: list[list[tuple[str, str, float]]]) -> CallSamples:
    calls = CallSamples()
    for step in steps:
        calls.add_step(step)
    return calls


def test_a_pause_on_one_call_in_a_minority_of_steps_does_not_count():
    clean = [("a", "aten::mm", 1e-3), ("b", "aten::mm", 1e-3)]
    steps = [list(clean) for _ in range(7)]
    steps[3] = [("a", "aten::mm", 40e-3), ("b", "aten::mm", 1e-3)]  # a 40 ms wait, once
    out = summarise(samples(steps))
    assert out["a"]["share"] == pytest.approx(0.5)
    assert out["a"]["self_ms"] == pytest.approx(1.0)
    assert out["a"]["spread"] < 0.1


def test_a_call_that_varies_from_step_to_step_has_a_wide_spread():
    # 1 ms in 3 steps of 7, 20 ms in the other 4: the lower quartile is 1 ms, but a resample
    # with two or fewer of the fast steps (about a third of them) reads 10-20 ms
    a = [1e-3 if s < 3 else 20e-3 for s in range(7)]
    steps = [[("a", "aten::mm", t), ("b", "aten::mm", 1e-3)] for t in a]
    out = summarise(samples(steps))
    assert out["a"]["share"] == pytest.approx(0.5)
    assert out["a"]["share_p10"] <= out["a"]["share"] < out["a"]["share_p90"]
    assert out["a"]["spread"] > 0.5


def test_calls_are_keyed_by_occurrence_and_regrouped_per_op():
    step = [("m1", "aten::mm", 1e-3), ("m1", "aten::mm", 3e-3), ("m2", "aten::add", 1e-3)]
    calls = samples([step, step, step])
    assert calls.keys == [("m1", "aten::mm", 0), ("m1", "aten::mm", 1), ("m2", "aten::add", 0)]
    per_op = summarise(calls.regroup(lambda key: key[1]))
    assert per_op["aten::mm"]["calls"] == 2
    assert per_op["aten::mm"]["share"] == pytest.approx(0.8)


def test_a_denominator_gives_shares_of_the_step():
    step = [("a", "aten::mm", 1e-3)]
    out = summarise(samples([step] * 5), [4e-3] * 5)
    assert out["a"]["share"] == pytest.approx(0.25)


def test_a_call_missing_from_some_steps_is_summarised_from_the_steps_that_made_it():
    one, two = [("a", "aten::mm", 1e-3)], [("a", "aten::mm", 1e-3), ("b", "aten::mm", 1e-3)]
    calls = samples([one, two])
    assert calls.samples[("b", "aten::mm", 0)] == [None, 1e-3]
    out = summarise(calls)
    assert out["b"]["self_ms"] == pytest.approx(1.0)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(min_value=1e-7, max_value=1.0), min_size=3, max_size=3),
        min_size=1,
        max_size=6,
    )
)
def test_shares_are_a_partition_and_spreads_are_finite(table):
    steps = [[(g, "aten::x", t) for g, t in zip("abc", row, strict=True)] for row in table]
    out = summarise(samples(steps), resamples=20)
    assert sum(v["share"] for v in out.values()) == pytest.approx(1.0)
    for v in out.values():
        assert v["share_p10"] <= v["share_p90"] + 1e-12
        assert v["spread"] is not None and v["spread"] >= 0


class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
        self.c = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.c(self.b(self.a(x)))


def test_identical_modules_need_the_same_class_parameters_and_calls():
    model = Pair()

    def step(x):
        model.zero_grad(set_to_none=True)  # as the probe's step does: no accumulation
        model(x).sum().backward()

    recorder = call_times.CallRecorder(lambda: step(torch.randn(3, 8)))
    recorder.record()
    groups = call_times.identical_groups(model, recorder.signatures, sorted(recorder.signatures))
    # a's input needs no gradient, so a makes one matmul fewer than b: not identical; c's
    # shapes differ
    assert groups == []
    recorder = call_times.CallRecorder(lambda: step(torch.randn(3, 8, requires_grad=True)))
    recorder.record()
    groups = call_times.identical_groups(model, recorder.signatures, sorted(recorder.signatures))
    assert groups == [["Pair.a", "Pair.b"]]
    assert call_times._module_named(model, "Other.a") is None


class FakeTracker:
    def __init__(self):
        self.parents = {"Global"}


def test_the_module_entered_last_owns_a_call_even_beside_a_stale_one():
    from torchport.instruments.roofline import Innermost

    tracker = FakeTracker()
    owner = Innermost(tracker)
    assert owner() == "Global"
    tracker.parents = {"Global", "M", "M.layers.10", "M.layers.10.attn"}  # entered together
    assert owner() == "M.layers.10.attn"
    # backward: layer 10's attention stays open while layer 9's runs (ModuleTracker did not
    # close it); the deepest-longest name would be the stale one, whatever the hash order
    tracker.parents = {"Global", "M", "M.layers.10.attn", "M.layers.9", "M.layers.9.attn"}
    assert owner() == "M.layers.9.attn"
    tracker.parents = {"Global", "M", "M.layers.9.attn", "Func"}  # a module outside the tree
    assert owner() == "M.layers.9.attn.Func"
    tracker.parents = {"Global", "M"}
    assert owner() == "M"
    assert Innermost(None)() == "Global"
