"""The coverage audit's denominator checked against the dispatcher itself, on the CPU (in
process) and on simdev (in a child: PrivateUse1 is named once per process), its guarded
private APIs' fallbacks, and the join with a run's dispatched ops (views/op_coverage.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchport.cases import ops_schema
from torchport.cases.ops_reasons import EXCLUDE_REASONS
from torchport.instruments import op_coverage
from torchport.views import op_coverage as view


@pytest.fixture(scope="module")
def cpu_audit():
    return op_coverage.audit("cpu")


def test_cpu_kernels_are_the_dispatchers_cpu_registrations(cpu_audit):
    registered = set(torch._C._dispatch_get_registrations_for_dispatch_key("CPU"))
    overloads = cpu_audit["overloads"]
    kernels = {n for n, (served, _) in overloads.items() if served == "kernel"}
    assert kernels == registered & set(overloads)
    assert cpu_audit["dispatch_key"] == "CPU" and cpu_audit["source"] == "dispatcher"
    # the CPU has no boxed fallback: nothing is served by one, nothing is graded so
    assert not cpu_audit["backend_fallback"]
    assert not any(served == "fallback" for served, _ in overloads.values())
    assert overloads["aten::add.Tensor"] == ["kernel", None]
    assert overloads["aten::matmul"][0] == "composite_implicit"  # decomposes above the key
    # an op with neither a CPU kernel nor a composite cannot be compared on the CPU
    missing = [n for n, (s, r) in overloads.items() if s == "missing"]
    assert missing and all(overloads[n][1] in EXCLUDE_REASONS for n in missing)
    assert {r for _, r in overloads.values() if r} <= set(EXCLUDE_REASONS)


SIMDEV_CHECK = r"""
import json, torch
from torchport.devices import simdev_backend as sb
from torchport.instruments import op_coverage
sb.install()
audit = op_coverage.audit("simdev")
registered = set(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))
ov = audit["overloads"]
kernels = {n for n, (s, _) in ov.items() if s == "kernel"}
sb.clear_op_tracking()
x = torch.arange(6.0).to("simdev")
torch.cumsum(x, 0); torch.add(x, x)
fell = sorted(sb.get_fallback_ops())
print(json.dumps({"key": audit["dispatch_key"], "fb": audit["backend_fallback"],
    "same": kernels == registered & set(ov), "cumsum": ov["aten::cumsum"][0],
    "cumsum_out": ov["aten::cumsum.out"][0],
    "add": ov["aten::add.Tensor"][0], "fell": fell,
    "served": sorted({s for s, _ in ov.values()})}))
"""


def test_simdev_audit_agrees_with_its_registrations_and_its_fallback_counter():
    proc = subprocess.run(
        [sys.executable, "-c", SIMDEV_CHECK], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["key"] == "PrivateUse1" and got["fb"] and got["same"]
    # cumsum is composite at the backend's level (structured: it calls cumsum.out), and
    # cumsum.out reaches the fallback, which the backend's own counter saw (it counts by
    # packet); add.Tensor has a kernel, and the counter did not see it
    assert got["cumsum"] == "composite_explicit" and got["cumsum_out"] == "fallback"
    assert got["fell"] == ["aten::cumsum"]
    assert got["add"] == "kernel" and not any(op.startswith("aten::add") for op in got["fell"])
    assert "fallback" in got["served"]


def test_without_the_dispatchers_op_list_the_jit_schemas_are_used(monkeypatch):
    def gone():
        raise AttributeError("no _dispatch_get_all_op_names")

    monkeypatch.setattr(torch._C, "_dispatch_get_all_op_names", gone)
    names, source = op_coverage.op_names()
    assert "aten::add.Tensor" in names and source.startswith("JIT schemas")
    assert "no _dispatch_get_all_op_names" in source


def test_without_the_kernel_lookup_every_overload_is_unknown_with_the_reason(monkeypatch):
    def gone(name, key):
        raise RuntimeError("lookup removed")

    monkeypatch.setattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", gone)
    audit = op_coverage.audit("cpu")
    assert {s for s, _ in audit["overloads"].values()} == {"unknown"}
    assert any("lookup removed" in n for n in audit["notes"])
    cov = view.coverage({"device": "cpu", "suite": "ops"}, [_audit_result(audit)])
    assert cov.count("unknown") > 0 and cov.count("tested") == 0


def test_without_any_op_list_the_audit_says_why(monkeypatch):
    def gone():
        raise AttributeError("removed")

    monkeypatch.setattr(torch._C, "_dispatch_get_all_op_names", gone)
    monkeypatch.setattr(torch._C, "_jit_get_all_schemas", gone)
    with pytest.raises(op_coverage.AuditUnavailable, match="neither"):
        op_coverage.audit("cpu")


def _audit_result(audit: dict) -> dict:
    return {
        "case": "audit/dispatcher",
        "findings": {"ladder": "audit", "coverage_audit": audit},
    }


def _op_result(case: str, ops: list[tuple[str, str]]) -> dict:
    return {
        "case": case,
        "findings": {
            "ladder": "op",
            "ops": [{"op": o, "device": d, "count": 1, "fallback": False} for o, d in ops],
        },
    }


AUDIT = {
    "dispatch_key": "PrivateUse1",
    "source": "dispatcher",
    "overloads": {
        "aten::add.Tensor": ["kernel", None],
        "aten::sin": ["fallback", None],
        "aten::cos": ["fallback", None],
        "aten::matmul": ["composite_implicit", None],
        "aten::_cudnn_rnn": ["missing", "backend_internal"],
        "aten::to_sparse": ["composite_explicit", "sparse"],
    },
}


def test_states_join_the_audit_with_what_ran_on_the_device():
    results = [
        _audit_result(AUDIT),
        _op_result(
            "ops/add/float32", [("aten.add.Tensor", "simdev:0"), ("aten.cos.default", "cpu")]
        ),
        _op_result(
            "ops/sin/float32", [("aten.sin.default", "simdev:0"), ("aten.add.Tensor", "simdev:0")]
        ),
        _op_result(
            "ops/x/float32",
            [("aten.to_sparse.default", "simdev:0"), ("aten.sin.default", "cpu->simdev:0")],
        ),
    ]
    cov = view.coverage({"device": "simdev", "suite": "ops"}, results)
    assert cov.total == 5 and cov.outside == 1  # matmul decomposes above the key
    states = {n: e[0] for n, e in cov.entries.items()}
    assert states == {
        "aten::add.Tensor": "tested",
        "aten::sin": "tested",
        "aten::cos": "not_reached",  # ran only on host tensors: not the device's
        "aten::_cudnn_rnn": "excluded",
        "aten::to_sparse": "tested",  # an excluded family that did run counts as tested
    }
    assert cov.entries["aten::add.Tensor"][2] == "ops: ops/add/float32"
    assert cov.tested_by["aten::add.Tensor"] == 2
    line = view.summary(cov)
    assert line.startswith("coverage: 3 of 5 backend-relevant aten overloads tested (60.0%)")
    assert "1 excluded (backend_internal 1)" in line and "1 not reached" in line


def test_diff_names_what_a_release_changed():
    a = view.coverage(
        {"device": "simdev", "suite": "ops"},
        [_audit_result(AUDIT), _op_result("ops/sin/float32", [("aten.sin.default", "simdev")])],
    )
    newer = json.loads(json.dumps(AUDIT))
    newer["overloads"]["aten::sin"] = ["kernel", None]  # a native kernel arrived
    newer["overloads"]["aten::tan"] = ["fallback", None]  # a new overload
    b = view.coverage(
        {"device": "simdev", "suite": "ops"},
        [_audit_result(newer), _op_result("ops/cos/float32", [("aten.cos.default", "simdev")])],
    )
    changes = view.diff(a, b)
    assert changes["newly_tested"] == ["aten::cos"]
    assert changes["no_longer_tested"] == ["aten::sin"]
    assert changes["only_b"] == ["aten::tan"] and changes["only_a"] == []
    assert changes["served_changed"] == [{"overload": "aten::sin", "a": "fallback", "b": "kernel"}]
    tables = view.diff_views(changes)
    assert tables[0].rows[0][-1] == "1 of 5 tested (20.0%)"
    assert len(tables[1].rows) == 4
    assert view.diff_views(view.diff(None, None)) == []


NAMES = st.from_regex(r"aten::[a-z_]{1,8}(\.[A-Za-z]{1,5})?", fullmatch=True)
SERVED = st.sampled_from(op_coverage.CLASSES)
REASON = st.one_of(st.none(), st.sampled_from(sorted(EXCLUDE_REASONS)))


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(NAMES, st.tuples(SERVED, REASON), max_size=30),
    st.lists(NAMES, max_size=20),
    st.sampled_from(["simdev:0", "cpu", "simdev->cpu", "", "weird::thing"]),
)
def test_every_relevant_overload_has_exactly_one_state(overloads, ran, where):
    audit = {
        "dispatch_key": "K",
        "source": "s",
        "overloads": {k: list(v) for k, v in overloads.items()},
    }
    recorded = [n.replace("::", ".") for n in ran]
    results = [_audit_result(audit), _op_result("ops/a/float32", [(n, where) for n in recorded])]
    cov = view.coverage({"device": "simdev", "suite": "ops"}, results)
    assert sum(cov.count(s) for s in view.STATES) == cov.total
    assert cov.total + cov.outside == len(overloads)
    on_device = where.split(":")[0] == "simdev"
    assert cov.count("tested") == (len(set(ran) & set(overloads)) if on_device else 0)
    assert view.summary(cov).startswith(f"coverage: {cov.count('tested')} of {cov.total}")


@pytest.mark.parametrize(
    "recorded, registered",
    [
        ("aten.add.Tensor", "aten::add.Tensor"),
        ("aten.sin.default", "aten::sin"),
        ("aten.sin", "aten::sin"),
        ("aten.max.dim_max", "aten::max.dim_max"),
    ],
)
def test_recorded_names_map_to_registered_ones(recorded, registered):
    assert view.registry_name(recorded) == registered


def test_an_out_wrapper_of_a_functional_without_a_cpu_kernel_is_excluded_with_it(cpu_audit):
    ov = cpu_audit["overloads"]
    # CUDA's batch_norm_stats: no CPU kernel; its out= is PyTorch's composite calling it
    assert ops_schema.functional_sibling("aten::batch_norm_stats.out") == "aten::batch_norm_stats"
    assert ov["aten::batch_norm_stats"][1] == "no_cpu_kernel"
    assert ov["aten::batch_norm_stats.out"] == ["composite_explicit", "no_cpu_kernel"]
    assert ops_schema.functional_sibling("aten::native_norm.ScalarOpt_dim_dtype_out") == (
        "aten::native_norm.ScalarOpt_dim_dtype"
    )
    # a composite out= whose functional the CPU runs stays in the count
    assert ops_schema.functional_sibling("aten::add.out") == "aten::add.Tensor"
    assert ov["aten::add.out"][1] is None
    # in-place and functional overloads have no functional sibling to follow
    assert ops_schema.functional_sibling("aten::add_.Tensor") is None
    assert ops_schema.functional_sibling("aten::add.Tensor") is None
    assert ops_schema.functional_sibling("aten::no_such_op.out") is None


def test_a_device_kernel_with_nothing_on_the_cpu_to_compare_is_excluded(monkeypatch):
    # simdev registers its bmm kernel for every bmm overload, CUDA's bmm.dtype included: the
    # reason is the reference's (the CPU has no kernel and no composite), not the device's
    real = op_coverage._has
    monkeypatch.setattr(op_coverage, "_has", lambda n, k: k == "PrivateUse1" or real(n, k))
    assert op_coverage.exclusion("aten::bmm.dtype", "kernel", "PrivateUse1") == "no_cpu_kernel"
    assert op_coverage.exclusion("aten::bmm", "kernel", "PrivateUse1") is None
    # a device kernel where the CPU would decompose the op (composite implicit): comparable
    name = "aten::_has_compatible_shallow_copy_type"
    assert op_coverage.exclusion(name, "kernel", "PrivateUse1") is None
    # the transfers every backend implements stay in the count, though the CPU has none
    assert op_coverage.exclusion("aten::_copy_from", "kernel", "PrivateUse1") is None
    assert op_coverage.exclusion("aten::_copy_from", "missing", "CPU") == "no_cpu_kernel"


@pytest.mark.parametrize(
    "name,reason",
    [
        ("aten::indices_copy.out", "sparse"),
        ("aten::_values_copy", "sparse"),
        ("aten::_dyn_quant_matmul_4bit", "quantized"),
        ("aten::_convert_weight_to_int4pack_for_cpu", "quantized"),
        ("aten::_fused_moving_avg_obs_fq_helper", "quantized"),
        ("aten::_grid_sampler_2d_cpu_fallback", "backend_internal"),
        ("aten::grid_sampler_2d", None),
        ("aten::index_copy", None),
        ("aten::values_like", None),
    ],
)
def test_family_patterns_name_sparse_copies_and_quantization_helpers(name, reason):
    from torchport.cases.ops_reasons import family_exclusion

    assert family_exclusion(name) == reason
