"""Not-run accounting of an ops run: each case and sample counted once, by a kind of a fixed
list, apart from failures (views/ops_not_run.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from torchport.cases.ops_reasons import NOT_RUN_KINDS, SKIP_REASONS
from torchport.views import ops_not_run


def _r(status, skip=None, sample_skips=None):
    findings = {"ladder": "op"}
    if skip:
        findings["skip"] = skip
    if sample_skips:
        findings["sample_skips"] = sample_skips
    return {"case": "ops/x/float32", "status": status, "findings": findings}


def test_kinds_are_counted_apart_from_failures():
    results = [
        _r("skip", "op_dtype"),
        _r("skip", "device_dtype"),
        _r("skip", "capability"),
        _r("skip", "random"),
        _r("skip", "time_budget", {"time_budget": 7}),
        _r("pass", sample_skips={"cpu_raises": 3, "sparse": 2}),
        _r("crash"),
        _r("timeout"),
        _r("accuracy_fail"),  # a failure: not a not-run
    ]
    got = ops_not_run.not_run(results)
    assert set(got) == set(NOT_RUN_KINDS)
    assert got["dtype_unsupported"]["cases"] == 2
    assert got["capability_absent"]["cases"] == 1
    assert got["excluded_family"] == {
        "cases": 1,
        "samples": 2,
        "reasons": {"random": 1, "sample:sparse": 2},
    }
    assert got["invalid_input"]["samples"] == 3
    assert got["time_budget"] == {
        "cases": 2,
        "samples": 7,
        "reasons": {"time_budget": 1, "timeout": 1, "sample:time_budget": 7},
    }
    assert got["crash_isolated"]["cases"] == 1
    line = ops_not_run.note(got)
    assert line.startswith("not run (apart from failures): dtype_unsupported 2 cases")
    view = ops_not_run.view(got)
    assert [row[0] for row in view.rows] == list(NOT_RUN_KINDS)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["pass", "skip", "crash", "timeout", "eager_fail"]),
            st.one_of(st.sampled_from(sorted(SKIP_REASONS)), st.text(max_size=8)),
            st.dictionaries(st.sampled_from(sorted(SKIP_REASONS)), st.integers(0, 50)),
        ),
        max_size=30,
    )
)
def test_every_case_and_sample_is_counted_once(rows):
    results = [
        _r(status, skip if status == "skip" else None, samples) for status, skip, samples in rows
    ]
    got = ops_not_run.not_run(results)
    not_ran = sum(status in ("skip", "crash", "timeout") for status, _, _ in rows)
    assert sum(v["cases"] for v in got.values()) == not_ran
    assert sum(v["samples"] for v in got.values()) == sum(sum(s.values()) for _, _, s in rows)
