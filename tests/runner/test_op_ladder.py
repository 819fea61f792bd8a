"""The op ladder on the CPU, in process: the reference against itself passes or skips with a
reason; integer and bool outputs are compared exactly; skip reasons are data.

(simdev placement, planted wrong kernels and the CLI: tests/interfaces/test_ops_cli.py.)
"""

from __future__ import annotations

import pytest

pytest.importorskip("expecttest")
torch = pytest.importorskip("torch")

from torchport.cases.ops import AUDIT_CASE, SKIP_REASONS, AuditCase, OpCase, SchemaCase, ops_suite
from torchport.cases.registry import select
from torchport.config import ConfigError, RunConfig
from torchport.devices import get_adapter
from torchport.runner.ops.ladder import OpLadder

CASES = (
    "ops/add/float32",
    "ops/add/bfloat16",
    "ops/add/int64",
    "ops/eq/bool",
    "ops/softmax/float16",
    "ops/argmax/float32",
    "ops/nonzero/float32",
    "ops/bitwise_and/float32",
    "ops/bernoulli/float32",
    "ops/jiterator_unary/float32",
    "ops/randint/int64",
    "ops/item/float32",
)


def run_case(case, adapter, mode="eager"):
    config = RunConfig(suite="ops", device="cpu", modes=("eager",))
    return OpLadder(case, mode, config, adapter, lambda event: None, {}).run()


@pytest.fixture(scope="module")
def results():
    adapter = get_adapter("cpu")
    adapter.prepare()
    by_id = {c.id: c for c in ops_suite()}
    return {case_id: run_case(by_id[case_id], adapter) for case_id in CASES}


def test_cpu_against_itself_passes_or_skips_with_a_reason(results):
    for case_id, r in results.items():
        assert r["status"] in ("pass", "skip"), (case_id, r["error"])
        if r["status"] == "skip":
            assert r["findings"]["skip"] in SKIP_REASONS and r["error"]["message"], case_id


def test_a_pass_checked_every_sample_forward_and_backward(results):
    r = results["ops/add/float32"]
    m = r["metrics"]
    assert m["ops_samples"] > 0 and m["ops_samples_checked"] == m["ops_samples"]
    assert m["ops_backward_checked"] > 0
    assert r["findings"]["reference_dtype"] == "float64" and r["findings"]["backward"]
    assert r["grade"] == "on_device" and r["findings"]["served"] == "kernel"
    dispatched = {row["op"] for row in r["findings"]["ops"]}
    assert "aten.add.Tensor" in dispatched  # keyed by the aten overloads the samples ran
    assert results["ops/softmax/float16"]["findings"]["served"] == "composite"  # -> _softmax


def test_integer_and_bool_cases_compare_exactly_against_the_same_dtype(results):
    for case_id in ("ops/add/int64", "ops/eq/bool", "ops/argmax/float32"):
        r = results[case_id]
        assert r["status"] == "pass", r["error"]
        assert r["metrics"]["parity_max_abs_err"] == 0.0
    assert results["ops/add/int64"]["findings"]["reference_dtype"] == "int64"
    assert not results["ops/add/int64"]["findings"]["backward"]


@pytest.mark.parametrize(
    "case_id, reason",
    [
        ("ops/bitwise_and/float32", "op_dtype"),  # OpInfo: integer-only op
        ("ops/bernoulli/float32", "opinfo_skip"),  # OpInfo skips test_compare_cpu: random
        ("ops/jiterator_unary/float32", "cpu_raises"),  # CUDA-only op: the CPU raises too
        ("ops/randint/int64", "random"),  # found by the aten tag of what it ran
    ],
)
def test_skip_reasons(results, case_id, reason):
    r = results[case_id]
    assert r["status"] == "skip" and r["findings"]["skip"] == reason
    assert r["error"]["message"].startswith(SKIP_REASONS[reason])


def test_data_dependent_ops_run_and_are_tagged(results):
    r = results["ops/nonzero/float32"]
    assert r["status"] == "pass" and "dynamic_output_shape" in r["findings"]["op_tags"]
    assert "data_dependent_output" in results["ops/item/float32"]["findings"]["op_tags"]


def test_ops_run_eager_only():
    from torchport.runner.plan import expand

    items = expand(RunConfig(suite="ops", cases=("ops/add/float32",)))  # default: both modes
    assert [(i.case, i.mode) for i in items] == [("ops/add/float32", "eager")]
    with pytest.raises(ConfigError, match="--modes eager"):
        expand(RunConfig(suite="ops", cases=("ops/add/float32",), modes=("compile",)))


def test_suite_shape_and_selection():
    cases = ops_suite()
    ids = {c.id for c in cases}
    assert {
        "ops/add/float32",
        "ops/add/bfloat16",
        "ops/add/float16",
        "ops/add/int64",
        "ops/bitwise_and/float32",
        "ops/bitwise_and/int8",
    } <= ids
    assert not any(c.id.endswith(("complex64", "float64")) for c in cases)
    chosen = {c.id for c in select(cases, ("ops/add*",))}
    assert "ops/add/float32" in chosen and "ops/addmm/float32" in chosen
    assert all(isinstance(c, (OpCase, SchemaCase)) and c.modes == ("eager",) for c in cases[1:])
    assert any(isinstance(c, SchemaCase) for c in cases)
    assert isinstance(cases[0], AuditCase) and cases[0].id == AUDIT_CASE
    add = next(c for c in cases if c.id == "ops/add/float32")
    assert add.sample_count() == run_count(add)
    assert next(c for c in cases if c.id == "ops/bitwise_and/float32").sample_count() == 0


def run_count(case) -> int:
    from torchport.cases import opinfo

    return len(opinfo.samples(case.opinfo(), "cpu", case.dtype, requires_grad=False, seed=0))


def test_opinfo_decorations_give_skips_and_tolerances():
    from torchport.cases import opinfo

    bernoulli = opinfo.decorations(opinfo.get("bernoulli"), "cpu", "float32")
    assert bernoulli.skip  # OpInfo's own reason text
    acos = opinfo.decorations(opinfo.get("acos"), "cpu", "bfloat16")
    assert acos.atol is not None and acos.tolerance_source.startswith("OpInfo override")
    assert opinfo.decorations(opinfo.get("add"), "cpu", "float32").atol is None


def test_verdict_names_an_error_that_came_after_more_mismatches_than_are_kept():
    """Errors counted while the failures kept are all mismatches: the verdict never crashes
    (it used to raise StopIteration) and names the error."""
    from torchport.runner.ops import ladder as op_ladder

    adapter = get_adapter("cpu")
    config = RunConfig(suite="ops", device="cpu", modes=("eager",))
    ladder = OpLadder(
        OpCase("softmax", "float32", autograd=True),
        "eager",
        config,
        adapter,
        lambda event: None,
        {},
    )
    for index in range(op_ladder.MAX_FAILURES_KEPT + 3):
        ladder._fail(index, "forward", "mismatch", f"out: off by {index}", ["aten._softmax"])
    ladder._fail(99, "backward", "error", "RuntimeError: boom", ["aten._softmax_backward_data"])
    ladder._verdict(100)  # decides; finish() gives the result (runner/stages.py)
    out = ladder.finish()
    assert (out["status"], out["stage"]) == ("eager_fail", "run")
    assert out["error"]["type"] == "OpError"
    assert "sample 99 backward: RuntimeError: boom" in out["error"]["message"]
    kinds = [f["kind"] for f in out["findings"]["failures"]]
    assert kinds.count("mismatch") == op_ladder.MAX_FAILURES_KEPT and kinds[-1] == "error"


def _ladder(case_id: str, **config):
    by_id = {c.id: c for c in ops_suite()}
    cfg = RunConfig(suite="ops", device="cpu", modes=("eager",), **config)
    return OpLadder(by_id[case_id], "eager", cfg, get_adapter("cpu"), lambda event: None, {})


def test_depth_one_runs_forward_only():
    r = _ladder("ops/add/float32", depth=1).run()
    assert r["status"] == "pass" and r["findings"]["depth"] == 1
    assert not r["findings"]["backward"] and r["metrics"]["ops_backward_checked"] == 0
    assert r["metrics"]["ops_samples_checked"] == r["metrics"]["ops_samples"] > 0


@pytest.mark.parametrize("depth", [0, 6, True, "2"])
def test_depth_out_of_range_is_refused_with_the_flag(depth):
    with pytest.raises(ConfigError, match="--depth"):
        RunConfig(suite="ops", depth=depth)


def test_a_spent_time_budget_counts_the_samples_left_as_not_run():
    """Past the budget no sample starts: the rest are counted (time_budget), never failed."""
    r = _ladder("ops/add/float32", timeout_s=1e-6).run()
    assert r["status"] == "skip" and r["findings"]["skip"] == "time_budget"
    assert r["findings"]["sample_skips"] == {"time_budget": r["metrics"]["ops_samples"]}
    assert r["findings"]["time_budget_s"] > 0


def test_a_dtype_the_device_cannot_make_is_a_capability_skip(monkeypatch):
    real = torch.empty

    def empty(*size, dtype=None, device=None, **kw):
        if size == (1,) and dtype is torch.bfloat16 and device is not None:
            raise RuntimeError("bfloat16 is not supported on this device")
        return real(*size, dtype=dtype, device=device, **kw)

    monkeypatch.setattr(torch, "empty", empty)
    r = _ladder("ops/add/bfloat16").run()
    assert r["status"] == "skip" and r["findings"]["skip"] == "capability"
    assert "bfloat16 is not supported" in r["error"]["message"]
