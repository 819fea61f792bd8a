"""The compatibility table made from an evaluation's evidence (views/compat.py)."""

from __future__ import annotations

from torchport.views.compat import compat_diff, compat_lines, compat_table
from torchport.views.evaluation import Plan, PlannedPart


def _model(ops, fallback=None, host_ops=()):
    return {
        "case": "smoke/mlp",
        "mode": "eager",
        "status": "pass",
        "grade": "fallback" if fallback else "on_device",
        "findings": {"ops": ops, "fallback_ops": fallback or {}, "host_ops": list(host_ops)},
    }


def _op(case, status, grade="on_device", skip=None, fallback=None):
    findings = {"ladder": "op", "fallback_ops": fallback or {}} | ({"skip": skip} if skip else {})
    return {"case": case, "mode": "eager", "status": status, "grade": grade, "findings": findings}


def test_each_op_gets_one_verdict_from_the_evidence():
    model = _model(
        [
            {"op": "aten.mm.default", "device": "simdev", "count": 3, "fallback": False},
            {"op": "aten.cumsum.default", "device": "cpu", "count": 1, "fallback": True},
        ],
        fallback={"aten.cumsum.default": 1},
        host_ops=[{"op": "aten.cumsum.default", "evidence_class": "a"}],
    )
    ops = [
        _op("ops/relu/float32", "pass"),
        _op("ops/sort/float32", "eager_fail"),
        _op("ops/nonzero/float32", "pass", grade="fallback", fallback={"aten.cumsum.default": 1}),
        _op("ops/fft/float32", "skip", skip="dtype not supported"),
    ]
    plan = Plan("ev", "simdev", None, 60, [])
    plan.parts = [
        PlannedPart(
            "ops",
            "device",
            "simdev",
            "q",
            {},
            ["ops/relu/float32", "ops/tan/float32"],
            ["eager"],
            1.0,
            0,
        )  # fmt: skip
    ]
    rows = {r.op: r for r in compat_table({"smoke": [model], "ops": ops}, plan)}
    assert rows["mm"].verdict == "native" and rows["mm"].seen_in == ["smoke"]
    assert (rows["cumsum"].verdict, rows["cumsum"].evidence_class) == ("host fallback", "a")
    assert rows["cumsum"].dtypes == ["float32"]
    assert rows["relu"].verdict == "native"
    assert rows["sort"].verdict == "fails" and "eager_fail" in rows["sort"].detail
    assert rows["nonzero"].verdict == "host fallback"
    assert (rows["nonzero"].detail, rows["nonzero"].evidence_class) == ("on the host: cumsum", None)
    assert rows["fft"].verdict == "not reached" and "dtype not supported" in rows["fft"].detail
    assert rows["tan"].verdict == "not reached" and rows["tan"].detail == "no result"


def test_the_text_form_is_sorted_and_diffs_by_op():
    before = compat_table({"smoke": [_model([], fallback={"aten.cumsum.default": 1})]}, None)
    after = compat_table(
        {"smoke": [_model([{"op": "aten.cumsum.default", "device": "simdev", "fallback": False}])]},
        None,
    )
    assert compat_lines(before) == ["cumsum\thost fallback\tfloat32\t-\t-"]
    assert compat_diff(before, after) == [
        {"op": "cumsum", "before": "host fallback", "after": "native"}
    ]
    assert compat_diff(after, after) == []
