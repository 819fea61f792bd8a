"""The placement view ranks host ops by evidence class first (a dispatcher fallback before
more-called warned ones) and shows host work inside device kernels (class d) apart."""

from __future__ import annotations

from torchport.views import placement


def _result(case, fallback_ops, host_ops, host_kernel_ops=None):
    return {
        "case": case,
        "mode": "eager",
        "status": "pass",
        "grade": "fallback" if fallback_ops else "host_kernel",
        "findings": {
            "fallback_ops": fallback_ops,
            "host_ops": host_ops,
            "host_kernel_ops": host_kernel_ops or {},
        },
        "metrics": {},
    }


def _h(op, count, klass, how):
    return {
        "op": op,
        "device": "hostdev",
        "count": count,
        "evidence_class": klass,
        "found_by": [how],
    }


# keys sorted as the store keeps them: the order must come from the classes, not the dict
MIXED = _result(
    "m/mixed",
    {"aten.cumsum.default": 1, "aten.gather.default": 40, "aten.mul.Tensor": 90},
    [
        _h("aten.cumsum.default", 1, "a", "dispatcher: served by the backend's fallback"),
        _h("aten.gather.default", 40, "b", "warning (generic pattern)"),
        _h("aten.mul.Tensor", 90, "c", "recorder: ran on host tensors"),
        _h("aten.mm.default", 300, "d", "nested: aten.mm on the host x1 inside the device op"),
    ],
    {"aten.mm.default": 300},
)
MLP = _result(
    "m/mlp",
    {},
    [_h("aten.mm.default", 3, "d", "nested: ...")],
    {"aten.mm.default": 3, "aten.addmm.default": 2},
)


def test_host_ops_rank_class_first():
    shown = placement.host_ops(MIXED["findings"]["fallback_ops"], placement.op_classes([MIXED]))
    assert list(shown) == ["cumsum", "gather", "mul.Tensor"]


def test_found_by_leaves_class_d_to_its_own_note():
    text = placement.found_by(MIXED["findings"]["host_ops"])
    assert text == "cumsum [a]: dispatcher; gather [b]: warning; mul.Tensor [c]: host tensors"
    assert placement.host_kernels(MLP) == (
        "m/mlp (eager): device kernels with host work inside (class d, not a fallback): "
        "mm x3, addmm x2"
    )


def test_view_and_ranking_across_results():
    view = placement.build({"config": {"probes": ["placement"]}}, [MLP, MIXED])
    assert view is not None
    assert view.notes[0].endswith("1 pass whose device kernels compute on the host")
    ranked = [op for op, _, _ in placement.ranked_host_ops([MLP, MIXED])]
    assert ranked == ["cumsum", "gather", "mul.Tensor"]  # the class-a op first, mm not a host op
