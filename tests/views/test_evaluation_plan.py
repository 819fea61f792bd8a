"""Sizing an evaluation's plan to its budget (views/evaluation.py): pure, no runs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from torchport.views.evaluation import (
    FILL,
    PART_OVERHEAD_S,
    Candidate,
    Durations,
    Plan,
    size_plan,
)


def _candidate(name, cases, prior_s=10.0, sides=(("device", "simdev"),), minimum=1, **kw):
    return Candidate(name, "q", {"suite": name}, list(cases), ("eager",), prior_s,
                     list(sides), minimum=minimum, **kw)  # fmt: skip


def _plan(candidates, budget_s, observed=()):
    return size_plan(
        "ev-test",
        device="simdev",
        against=None,
        budget_s=budget_s,
        workloads=[],
        candidates=candidates,
        durations=Durations(list(observed)),
    )


def test_parts_in_priority_order_then_grow_while_the_estimate_fits():
    plan = _plan([_candidate("a", ["a1", "a2", "a3"]), _candidate("b", ["b1", "b2"])], 100)
    # target 85 s: a1 and b1 (20 + 10 each = 60 s), then a2 (70 s), b2 (80 s); a3 would be 90
    assert [(p.name, p.cases) for p in plan.parts] == [("a", ["a1", "a2"]), ("b", ["b1", "b2"])]
    assert plan.estimate_s == 80
    assert plan.parts[0].left_out == ["a3"]


def test_a_part_that_does_not_fit_is_left_out_with_the_time_it_needed():
    plan = _plan([_candidate("a", ["a1"], prior_s=50), _candidate("b", ["b1"], prior_s=50)], 100)
    assert [p.name for p in plan.parts] == ["a"]
    (left,) = plan.left_out
    assert left["part"] == "b" and "needs ~70 s" in left["why"] and "15 s" in left["why"]


def test_a_part_that_cannot_run_says_why():
    plan = _plan([_candidate("k", [], why_not="no replacement kernels given")], 1000)
    assert plan.parts == []
    assert plan.left_out == [{"part": "k", "side": "device", "why": "no replacement kernels given"}]


def test_past_durations_replace_the_prior_this_device_first():
    observed = [("simdev", "a1", "eager", 2.0), ("cpu", "a1", "eager", 40.0)]
    plan = _plan([_candidate("a", ["a1"], prior_s=99)], 1000, observed)
    assert plan.parts[0].estimate_s == PART_OVERHEAD_S + 2.0
    assert plan.parts[0].measured == 1


def test_both_sides_grow_together():
    sides = (("device", "simdev"), ("reference", "cpu"))
    plan = _plan([_candidate("a", ["a1", "a2", "a3"], sides=sides)], 150)
    device, reference = plan.parts
    assert device.cases == reference.cases and (device.side, reference.side) == sides[0][:1] + (
        "reference",
    )


def test_the_plan_round_trips_through_its_note():
    plan = _plan([_candidate("a", ["a1"])], 100)
    assert Plan.from_dict(plan.to_dict()).to_dict() == plan.to_dict()


@settings(max_examples=150, deadline=None)
@given(
    budget=st.floats(min_value=0, max_value=1e5, allow_nan=False),
    parts=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=20),
            st.floats(min_value=0, max_value=500, allow_nan=False),
            st.integers(min_value=1, max_value=2),
            st.integers(min_value=1, max_value=5),
        ),
        max_size=8,
    ),
)
def test_any_plan_fits_its_budget(budget, parts):
    sides = [("device", "simdev"), ("reference", "cpu")]
    candidates = [
        _candidate(f"p{i}", [f"c{j}" for j in range(n)], prior, sides[:nsides], minimum=m)
        for i, (n, prior, nsides, m) in enumerate(parts)
    ]
    plan = _plan(candidates, budget)
    assert plan.estimate_s <= budget * FILL + 0.1 * len(plan.parts)
    chosen = {p.name for p in plan.parts}
    for c in candidates:  # every candidate is either planned or left out with a reason
        assert c.name in chosen or any(x["part"] == c.name for x in plan.left_out)
