"""Schema-made samples (cases/ops_schema.py) and the schema ladder (runner/ops/schema.py): any
registered overload gets a sample or a reason, never a crash; the CPU probe survives a CPU
kernel's crash; on the CPU against itself every judged overload passes; the coverage audit
credits what a case judged on the device (variants' out=/in-place calls and backward passes
included) and nothing the CPU rejected; on simdev a planted bug is found by a schema case."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import expecttest  # noqa: F401  (the OpInfo database needs it: a missing one fails)
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchport.cases import ops_schema
from torchport.cases.ops import SchemaCase, ops_suite
from torchport.cases.ops_reasons import REASON_KIND, SKIP_REASONS
from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.runner.ops import schema as op_schema
from torchport.runner.ops.ladder import OpLadder
from torchport.runner.ops.schema import SchemaLadder
from torchport.views import op_coverage


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(ops_schema.registered()),
    st.sampled_from(ops_schema.plans("float32")),
)
def test_any_registered_overload_gets_a_sample_or_a_reason(name, plan):
    try:
        schema = ops_schema.schema_of(name)
        sample = ops_schema.make(schema, plan[0], plan[1], "cpu", seed=1, fill=plan[2])
    except ops_schema.NoSample as exc:
        assert exc.reason in ops_schema.NO_SAMPLE and exc.detail
        assert exc.reason in SKIP_REASONS and exc.reason in REASON_KIND
        return
    positional = [a for a in schema.arguments if not a.kwarg_only]
    assert len(sample.args) <= len(positional)
    assert set(sample.kwargs) <= {a.name for a in schema.arguments if a.kwarg_only}
    for name_written in sample.written:  # every written argument is in the call
        assert name_written in sample.values()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(ops_schema.registered()), st.data())
def test_any_registered_overload_gets_a_sample_or_a_reason_under_its_family_plans(name, data):
    plan = data.draw(st.sampled_from(ops_schema.plans_for(name, "float32")))
    try:
        schema = ops_schema.schema_of(name)
        sample = ops_schema.make(
            schema, plan[0], plan[1], "cpu", seed=1, fill=plan[2], family=plan[3]
        )
    except ops_schema.NoSample as exc:
        assert exc.reason in ops_schema.NO_SAMPLE and exc.detail
        return
    assert set(sample.kwargs) <= {a.name for a in schema.arguments if a.kwarg_only}
    assert all(w in sample.values() for w in sample.written)


# One overload per family plan and per name rule, each of which no general plan reached: the
# CPU accepts the sample made for it (a plan is found), and the plan is the one the rule made.
FAMILY_REACHED = [
    "aten::_slow_conv2d_forward",
    "aten::slow_conv_transpose2d",
    "aten::slow_conv3d_forward",
    "aten::convolution_backward.out",
    "aten::conv_tbc",
    "aten::upsample_nearest2d_backward.grad_input",
    "aten::upsample_trilinear3d.out",
    "aten::fractional_max_pool2d",
    "aten::grid_sampler_3d.out",
    "aten::affine_grid_generator",
    "aten::nll_loss2d_forward.output",
    "aten::multi_margin_loss.out",
    "aten::binary_cross_entropy.out",
    "aten::embedding_dense_backward",
    "aten::_embedding_bag.out",
    "aten::_transformer_encoder_layer_fwd",
    "aten::_ctc_loss.out",
    "aten::bmm.out",
    "aten::addmv_",
    "aten::glu_jvp",
    "aten::ormqr.out",
    "aten::native_layer_norm.out",
    "aten::native_group_norm.out",
    "aten::select_backward.out",
    "aten::diagonal_backward.out",
    "aten::_amp_update_scale_",
    "aten::_histogramdd_from_bin_tensors.out",
    "aten::_pack_padded_sequence",
    "aten::segment_reduce.out",
    "aten::_test_optional_intlist",
]
RULE_REACHED = [
    "aten::randint.low_out",  # low/high: a range that is not empty
    "aten::random_.from",  # from/to
    "aten::isin.Tensor_Tensor_out",  # out= dtype from the functional on meta: bool
    "aten::linalg_lu_factor_ex.out",  # ... int32 pivots and info
    "aten::scatter.reduce",  # scatter's reduce: 'add'
    "aten::set_.source_Storage",  # Storage
    "aten::constant_pad_nd.out",  # pad [1, 1]
    "aten::split_with_sizes_copy.out",  # split_sizes, an out list resized
    "aten::index_fill_.int_Tensor",  # value: 0-dim
    "aten::bernoulli_.Tensor",  # p in [0, 1)
    "aten::_fft_c2c.out",  # complex64 plans
    "aten::empty_permuted",  # physical_layout
    "aten::lu_unpack.out",  # LU_pivots: int32 1..n
    "aten::_assert_async.msg",  # assert_msg
    "aten::_softmax_backward_data.out",  # input_dtype: the plan's
]


def test_family_plans_and_name_rules_reach_what_no_general_plan_did():
    found = op_schema.probe(FAMILY_REACHED + RULE_REACHED, "float32", 0)
    missed = {n: found[n] for n in FAMILY_REACHED + RULE_REACHED if found[n][0] is None}
    assert not missed
    family = {n for n in found if ops_schema.plans_for(n, "float32")[found[n][0]][3] is not None}
    assert family == set(FAMILY_REACHED)  # the family's plan, after every general one failed


def test_out_tensors_take_the_dtypes_their_functional_returns():
    isin = ops_schema.make(
        ops_schema.schema_of("aten::isin.Tensor_Tensor_out"), (2, 3), "float32", "cpu"
    )
    assert isin.kwargs["out"].dtype == torch.bool and isin.kwargs["out"].numel() == 0
    lu = ops_schema.make(
        ops_schema.schema_of("aten::linalg_lu_factor_ex.out"), (3, 3), "float32", "cpu"
    )
    assert [lu.kwargs[k].dtype for k in ("LU", "pivots", "info")] == [
        torch.float32,
        torch.int32,
        torch.int32,
    ]
    # no functional sibling (an in-place op): the plan's dtype, as before
    add = ops_schema.make(ops_schema.schema_of("aten::add.out"), (2, 3), "float32", "cpu")
    assert add.kwargs["out"].dtype == torch.float32
    assert (
        ops_schema.functional_sibling("aten::isin.Tensor_Tensor_out") == "aten::isin.Tensor_Tensor"
    )


def test_a_family_plan_gives_its_arguments_as_it_says():
    from torchport.cases.ops_schema_plans import family_plans

    plans = {p.name: p for p in family_plans("slow_conv_dilated2d")}
    s = ops_schema.make(
        ops_schema.schema_of("aten::slow_conv_dilated2d"),
        (1, 2, 4, 4),
        "float32",
        "cpu",
        family=plans["conv2d"],
    )
    assert s.args[0].shape == (1, 2, 4, 4) and s.args[1].shape == (3, 2, 2, 2)
    assert s.args[2] == [2, 2] and s.args[3].shape == (3,)  # bias given though optional
    assert not family_plans("add")  # no family: the general plans only
    bag = {p.name: p for p in family_plans("_embedding_bag")}["embedding_bag"]
    s = ops_schema.make(
        ops_schema.schema_of("aten::_embedding_bag"), (3, 2), "float32", "cpu", family=bag
    )
    assert s.args[2].tolist() == [0, 2]  # offsets: two bags, the first at 0


def test_the_same_seed_makes_the_same_sample():
    schema = ops_schema.schema_of("aten::add.out")
    a, b = (ops_schema.make(schema, (2, 3), "float32", "cpu", seed=3) for _ in range(2))
    assert torch.equal(a.args[0], b.args[0]) and a.written == ["out"]
    assert a.kwargs["out"].numel() == 0  # out=: empty, the op resizes it


def test_rules_cover_out_lists_devices_and_missing_rules():
    foreach = ops_schema.make(
        ops_schema.schema_of("aten::_foreach_add.ScalarList"), (3,), "float32", "cpu"
    )
    assert len(foreach.args[0]) == 2 and foreach.args[1] == [2, 3]
    zeros = ops_schema.make(ops_schema.schema_of("aten::zeros"), (2, 3), "float32", "cpu")
    assert zeros.args[0] == [2, 3] and zeros.kwargs["device"] == torch.device("cpu")
    with pytest.raises(ops_schema.NoSample) as info:
        ops_schema.make(ops_schema.schema_of("aten::from_file"), (2,), "float32", "cpu")
    assert info.value.reason == "no_rule" and "filename" in info.value.detail


def test_the_catalog_has_a_schema_case_per_packet_outside_composites():
    cases = {c.id: c for c in ops_suite() if isinstance(c, SchemaCase)}
    assert "aten::add.out" in cases["schema/add"].overloads
    assert "schema/_foreach_add" in cases
    # decomposed above every backend, or an excluded family: not called
    assert "aten::linear" not in cases["schema/linear"].overloads  # (linear.out is explicit)
    assert not any("sparse" in c for c in cases)


def test_a_cpu_kernel_crash_in_the_probe_is_the_cpus_not_the_runs(monkeypatch):
    real = op_schema.find_plan

    def crashing(name, dtype_name, seed):
        if name == "aten::sub.Tensor":
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(name, dtype_name, seed)

    monkeypatch.setattr(op_schema, "find_plan", crashing)
    got = op_schema.probe(
        ["aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor"], "float32", 0
    )
    assert got["aten::sub.Tensor"] == (None, "cpu_crashes")
    assert got["aten::add.Tensor"] == (0, "") and got["aten::mul.Tensor"] == (0, "")


def test_the_probe_child_does_not_hang_in_a_thread_pool_its_parent_started(monkeypatch):
    # an OpenMP pool started in the parent does not survive the fork: a kernel entering it in
    # the child (_slow_conv2d_forward) waited until the deadline and read as a CPU crash
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.rand(256, 256)
        (x @ x).sum()
        torch.nn.functional.conv2d(torch.rand(4, 8, 32, 32), torch.rand(8, 8, 3, 3))
        monkeypatch.setattr(op_schema, "PROBE_TIMEOUT_S", 20.0)
        got = op_schema.probe(["aten::_slow_conv2d_forward"], "float32", 0)
    finally:
        torch.set_num_threads(threads)
    assert got["aten::_slow_conv2d_forward"][0] is not None, got


def run_cpu(packet: str) -> dict:
    case = SchemaCase(packet, ops_schema.packets()[packet])
    config = RunConfig(suite="ops", device="cpu", modes=("eager",))
    return SchemaLadder(case, "eager", config, get_adapter("cpu"), lambda e: None, {}).run()


@pytest.mark.parametrize(
    "packet", ["add", "add_", "cumsum", "_foreach_mul", "empty", "tanh_backward"]
)
def test_the_cpu_against_itself_passes_every_judged_overload(packet):
    r = run_cpu(packet)
    assert r["status"] == "pass", r["error"]
    states = r["findings"]["schema"]
    assert set(states) == set(ops_schema.packets()[packet])
    assert "failed" not in states.values() and "checked" in states.values()
    assert r["grade"] is None  # made-up inputs: no placement verdict


def test_outputs_not_determined_by_the_inputs_are_compared_by_shape_only():
    r = run_cpu("empty")
    assert r["metrics"]["schema_metadata_only"] == r["metrics"]["schema_checked"] >= 1
    r = run_cpu("rand_like")  # random: the device's generator; shape and dtype judged
    assert r["status"] == "pass", r["error"]
    assert r["metrics"]["schema_random"] == r["metrics"]["schema_metadata_only"] >= 1


def _audit(names: list[str]) -> dict:
    return {
        "ladder": "audit",
        "coverage_audit": {
            "dispatch_key": "CPU",
            "source": "test",
            "overloads": {n: ["kernel", None] for n in names},
        },
    }


def test_coverage_credits_what_was_judged_and_nothing_the_cpu_rejected():
    r = run_cpu("_pin_memory")  # the CPU rejects every plan (no accelerator): not credited
    assert set(r["findings"]["schema"].values()) == {"cpu_raises"}
    assert not r["findings"].get("ops")
    add = run_cpu("add")
    results = [
        {
            "case": "audit/dispatcher",
            "findings": _audit(["aten::add.out", "aten::add.Tensor", "aten::_pin_memory"]),
        },
        add,
        r,
    ]
    cov = op_coverage.coverage({"device": "cpu", "suite": "ops"}, results)
    assert cov.entries["aten::add.out"][0] == "tested"
    assert cov.entries["aten::add.out"][2] == "ops: schema/add"
    assert cov.entries["aten::_pin_memory"][0] == "not_reached"


def test_depth_three_variants_and_backward_passes_are_credited():
    by_id = {c.id: c for c in ops_suite()}
    config = RunConfig(suite="ops", device="cpu", modes=("eager",), depth=3)
    r = OpLadder(
        by_id["ops/tanh/float32"], "eager", config, get_adapter("cpu"), lambda e: None, {}
    ).run()
    names = ["aten::tanh.out", "aten::tanh_", "aten::tanh_backward", "aten::tanh"]
    results = [{"case": "audit/dispatcher", "findings": _audit(names)}, r]
    cov = op_coverage.coverage({"device": "cpu", "suite": "ops"}, results)
    assert {n: cov.entries[n][0] for n in names} == dict.fromkeys(names, "tested")


CHILD = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
from torchport.cases import ops_schema
from torchport.cases.ops import SchemaCase
from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.runner.ops.schema import SchemaLadder

adapter = get_adapter("simdev")
adapter.prepare()
config = RunConfig(suite="ops", device="simdev", modes=("eager",))
out = {}
for packet in sys.argv[1].split(","):
    case = SchemaCase(packet, ops_schema.packets()[packet])
    r = SchemaLadder(case, "eager", config, adapter, lambda e: None, {}).run()
    out[packet] = {"status": r["status"], "findings": r["findings"]}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_on_simdev_a_planted_bug_is_found_by_a_schema_case_and_credit_is_the_devices():
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_")}
    env["TORCHPORT_SIMDEV_BUGS"] = "all"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, "fmod_,cumsum,add,randint_like"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    fmod = got["fmod_"]
    assert fmod["status"] == "eager_fail"
    assert fmod["findings"]["schema"]["aten::fmod_.Scalar"] == "failed"
    assert any("fmod_ with a Scalar" in f["message"] for f in fmod["findings"]["failures"])
    # it raised on the device: tested (and failed), credited though the recorder kept no row
    raised = {r["op"]: r for r in fmod["findings"]["ops"]}["aten.fmod_.Scalar"]
    assert raised["raised"] and raised["device"].startswith("simdev")
    assert got["add"]["status"] == "pass" and got["cumsum"]["status"] == "pass"
    # randint_like.Tensor demands its 0-dim high on the CPU: given there, not a failure
    assert got["randint_like"]["status"] == "pass", got["randint_like"]["findings"]["failures"]
    rows = {r["op"]: r for r in got["cumsum"]["findings"]["ops"]}
    assert any(op.startswith("aten.cumsum") for op in rows)
    assert all(
        r["device"].split(":")[0] in ("simdev", "cpu") or "->" in r["device"] for r in rows.values()
    )


def test_the_cpu_disagreeing_with_itself_is_no_verdict():
    base = {"return": torch.tensor([1.0, 2.0])}
    assert op_schema._consistent(base, {"return": torch.tensor([1.0, 2.0], dtype=torch.float64)})
    assert not op_schema._consistent(
        base, {"return": torch.tensor([1.0, 9.0], dtype=torch.float64)}
    )


def test_zero_dim_tensors_but_the_first_go_back_to_the_host():
    meta = ops_schema.Sample(
        args=[torch.ones(2, device="meta"), torch.tensor(1.0, device="meta")],
        kwargs={"high": torch.tensor(2, device="meta")},
    )
    cpu = ops_schema.Sample(
        args=[torch.ones(2), torch.tensor(1.0)], kwargs={"high": torch.tensor(2)}
    )
    assert op_schema._zero_dim_moved(meta)
    mixed = op_schema._zero_dim_on_host(meta, cpu)
    assert mixed.args[0].device.type == "meta"
    assert mixed.args[1].device.type == "cpu" and mixed.kwargs["high"].device.type == "cpu"


def test_the_ops_view_counts_schema_cases_crashed_ones_included():
    from torchport.views import ops as ops_view

    judged = run_cpu("add")
    crashed = {"case": "schema/range", "status": "crash", "findings": {}, "metrics": {}}
    view = ops_view.build({"device": "cpu", "id": "R"}, [judged, crashed])
    assert view is not None
    assert view.notes[0].startswith("2 results: 1 passed, 1 failed (crash 1)")
    assert "crash_isolated 1 cases" in view.notes[1]
    line = ops_view.schema_line([judged, crashed])
    assert line is not None and "of 2 packets" in line and "0 failed" in line
