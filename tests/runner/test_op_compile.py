"""--depth 5 (runner/ops/ladder.py ``_compiled``): each case's op also through torch.compile
with the device's default backend, judged against the CPU; a compile that raises is the
case's compile_fail, never a tool crash."""

from __future__ import annotations

import expecttest  # noqa: F401  (the OpInfo database needs it: a missing one fails)
import pytest

from torchport.cases.ops import ops_suite
from torchport.cases.ops_reasons import DEPTHS
from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.runner.ops.ladder import COMPILE_SAMPLES, OpLadder


def run_cpu(case_id: str, backend: str | None, depth: int = 5) -> dict:
    by_id = {c.id: c for c in ops_suite()}
    config = RunConfig(
        suite="ops", device="cpu", modes=("eager",), depth=depth, compile_backend=backend
    )
    return OpLadder(by_id[case_id], "eager", config, get_adapter("cpu"), lambda e: None, {}).run()


def test_depth_five_is_compile():
    assert DEPTHS[5] == "compile"
    assert "compile" not in run_cpu("ops/neg/float32", "aot_eager", depth=4)["findings"]


def test_the_compiled_op_is_judged_against_the_cpu():
    r = run_cpu("ops/neg/float32", "aot_eager")
    assert r["status"] == "pass", r["error"]
    found = r["findings"]["compile"]
    assert found["backend"]["name"] == "aot_eager"
    assert 1 <= found["checked"] <= COMPILE_SAMPLES and found["failed"] == 0


def test_a_compile_that_raises_is_the_cases_compile_fail():
    r = run_cpu("ops/neg/float32", "no_such_backend")
    assert r["status"] == "compile_fail" and r["stage"] == "compile"
    assert r["error"]["type"] == "CompileError" and "no_such_backend" in r["error"]["message"]
    assert {f["phase"] for f in r["findings"]["failures"]} == {"compile"}


@pytest.mark.slow
@pytest.mark.parametrize("case_id", ["ops/add/float32", "ops/cumsum/float32"])
def test_the_cpus_default_backend_compiles_and_passes(case_id):
    r = run_cpu(case_id, None)  # Inductor on the CPU: many seconds here
    assert r["status"] == "pass", r["error"]
    assert r["findings"]["compile"]["backend"]["name"] == "inductor"
    assert r["findings"]["compile"]["checked"] >= 1
