"""The compile probe: cold/warm waits, graph breaks, recompiles, time limits, missing metrics.

Most tests run the child's functions in this process with the "eager" backend (dynamo only, no
kernel builds), so they take seconds; the cold/warm test builds real Inductor kernels for a
one-layer model in fresh processes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import torchport

torch = pytest.importorskip("torch")

from torchport.cases.base import FunctionCase, Size, Workload  # noqa: E402
from torchport.cases.registry import find_case  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.devices.cpu import CPUAdapter  # noqa: E402
from torchport.instruments import compile_metrics as cm  # noqa: E402
from torchport.instruments.compile_child import measure  # noqa: E402
from torchport.instruments.compile_run import Child  # noqa: E402
from torchport.instruments.compile_shapes import study  # noqa: E402
from torchport.probes.base import Subject  # noqa: E402
from torchport.probes.compile import CompileProbe, build_report, child_findings, cold_metrics  # noqa: E402
from torchport.runner.plan import cold_worker_modes  # noqa: E402
from torchport.timing import clock  # noqa: E402
from torchport.views import compile as compile_view  # noqa: E402
from torchport.views.base import Annotated, Breaks, Exceeded, Graphs  # noqa: E402

TINY = "tests.probes.test_compile:tiny_forward"
REPO = Path(__file__).resolve().parents[2]


def tiny_forward():
    """A one-layer forward-only workload: the cheapest real Inductor compile."""
    return {
        "model": torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()),
        "inputs": torch.randn(4, 8),
    }


def spec_for(suite: str, case: str, **extra) -> dict:
    return {
        "suite": suite,
        "workload": None,
        "case": case,
        "device": "cpu",
        "dtype": "float32",
        "seed": 0,
        "batch": None,
        "seq": None,
        "backend": "eager",
        **extra,
    }


def measure_in_process(suite: str, case: str, **extra) -> dict:
    cm.reset_dynamo()
    return measure(
        find_case(suite, case), spec_for(suite, case, **extra), CPUAdapter(), lambda event: None
    )


def subject_for(case_id: str, suite: str = "planted", workload=None, **config) -> Subject:
    cfg = RunConfig(
        suite=suite,
        device="cpu",
        modes=("compile",),
        probes=("compile",),
        workload=workload,
        **config,
    )
    case = find_case(suite, case_id, workload=workload)
    return Subject(
        case=case,
        mode="compile",
        config=cfg,
        adapter=CPUAdapter(),
        device="cpu",
        dtype=torch.float32,
        workload=None,
        model=None,
        runner=None,
        step=lambda: {},
        make_runner=lambda: None,
    )


# -- graph breaks ----------------------------------------------------------------------------
def test_graph_break_reported_with_reason_and_user_stack():
    cold = measure_in_process("planted", "planted/graph_break")
    assert cold["status"] == "ok"
    assert cold["graph_count"] == 2 and [g["ops"] for g in cold["graphs"]] == [2, 1]
    [brk] = cold["graph_breaks"]
    assert brk["count"] == 1
    assert "torch._dynamo.graph_break()" in brk["reason"]
    assert "planted.py" in brk["stack"][-1] and "in forward" in brk["stack"][-1]
    assert cold["eager_frames"] == []
    metrics = cold_metrics(cold)
    assert metrics["compile_graph_break_count"] == 1 and metrics["compile_graph_count"] == 2
    assert metrics["compile_cold_dynamo_s"] > 0


# -- missing metrics -------------------------------------------------------------------------
def test_missing_compilation_metrics_are_unavailable_not_zero(monkeypatch):
    import torch._dynamo.convert_frame
    import torch._dynamo.utils

    monkeypatch.delattr(torch._dynamo.utils, "get_compilation_metrics")
    monkeypatch.delattr(torch._dynamo.utils, "graph_break_reasons")
    cold = measure_in_process("planted", "planted/graph_break")
    assert cold["status"] == "ok"
    assert cm.is_unavailable(cold["phases_s"])
    assert "get_compilation_metrics" in cold["phases_s"]
    assert cm.is_unavailable(cold["graphs"])
    assert cold["graph_count"] == 2  # still known, from dynamo's counters
    assert cold["timed_functions_s"]["OutputGraph.call_user_compiler"] > 0  # coarser account
    [brk] = cold["graph_breaks"]  # the reason survives; the stack says why it is missing
    assert cm.is_unavailable(brk["stack"]) and "graph_break_reasons" in brk["stack"]
    metrics = cold_metrics(cold)
    assert not any(k.startswith("compile_cold_dynamo") for k in metrics)  # no stand-in zero
    assert "compile_eager_frame_count" not in metrics

    monkeypatch.delattr(torch._dynamo.convert_frame, "exceeds_recompile_limit")
    watch = cm.RecompileLimitWatch()
    assert not watch.available and cm.is_unavailable(watch.reason)


def test_missing_counters_are_unavailable(monkeypatch):
    import torch._dynamo.utils

    monkeypatch.delattr(torch._dynamo.utils, "counters")
    snapshot = cm.counters_snapshot()
    assert cm.is_unavailable(snapshot)
    assert cm.cache_counts(snapshot) == snapshot
    assert cm.warm_verdict(snapshot, snapshot) == (False, snapshot)


# -- recompiles under changing shapes ----------------------------------------------------------
def _tiny_tokens(*, seed: int, size: Size) -> Workload:
    """Embedding + linear over (batch 2, seq) token ids: a token model that compiles fast."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Embedding(32, 8), torch.nn.Linear(8, 32))
    input_ids = torch.randint(0, 32, (2, size.seq or 8))  # (B, T)
    return Workload(
        model=model,
        kwargs={},
        args=(input_ids,),
        tokens=2 * (size.seq or 8),
        samples=2,
        loss_fn=lambda out: out.float().pow(2).mean(),
    )


def seq_study(case, seqs=(8, 16, 32, 64)) -> dict:
    spec = spec_for("test", case.id, shapes={"seq": list(seqs)})
    return study(case, spec, CPUAdapter(), lambda event: None)


def test_static_compile_recompiles_once_per_new_sequence_length():
    check_static_recompiles(seq_study(FunctionCase("test/tiny_tokens", _tiny_tokens)), "'args[0]'")


@pytest.mark.slow
def test_static_compile_of_llama_recompiles_once_per_new_sequence_length():
    check_static_recompiles(seq_study(find_case("smoke", "hf/llama")), "input_ids")


def check_static_recompiles(result: dict, input_name: str) -> None:
    [entry] = result["studies"]
    assert entry["dim"] == "seq" and entry["values"] == [8, 16, 32, 64]
    static = entry["static"]
    assert [s["compiles"] for s in static["sizes"]] == [1, 1, 1, 1]
    assert static["recompiles"] == 3
    assert static["sizes"][0]["reasons"] == []
    for previous, size in zip([8, 16, 32], static["sizes"][1:], strict=True):
        [reason] = size["reasons"]  # the guard that failed: the sequence length changed
        assert input_name in reason
        assert f"expected {previous}, actual {size['value']}" in reason
        assert size["recompile_limit_hits"] == [] and size["ran_eager"] is False
    dynamic = entry["dynamic"]
    assert dynamic["recompiles"] == 0 and dynamic["sizes"][0]["compiles"] == 1


def test_recompile_limit_sending_the_frame_to_eager_is_reported():
    spec = spec_for("smoke", "smoke/mlp", shapes={"batch": [2, 3, 4, 5]})
    try:
        result = study(
            find_case("smoke", "smoke/mlp"), spec, CPUAdapter(), lambda e: None, recompile_limit=2
        )
    finally:
        cm.set_recompile_limit(8)
    static = result["studies"][0]["static"]
    assert [s["compiles"] for s in static["sizes"]] == [1, 1, 0, 0]
    assert [bool(s["recompile_limit_hits"]) for s in static["sizes"]] == [0, 0, 1, 0]
    assert "recompile_limit" in static["sizes"][2]["recompile_limit_hits"][0]
    assert static["eager_after_limit"] == [4, 5]


def test_case_without_seq_studies_batch_and_says_so():
    spec = spec_for("smoke", "smoke/mlp", shapes={"seq": [2, 4]})
    result = study(find_case("smoke", "smoke/mlp"), spec, CPUAdapter(), lambda e: None)
    skipped, batch = result["studies"]
    assert skipped["not_applicable"].startswith("not applicable: no seq dimension")
    assert batch["dim"] == "batch" and "no seq dimension" in batch["note"]
    assert batch["static"]["recompiles"] == 1


# -- time limits -----------------------------------------------------------------------------
def test_cold_compile_past_the_limit_is_compile_timeout():
    subject = subject_for("planted/slow_compile", compile_timeout_s=2.0, compile_backend="eager")
    start = clock()
    report = CompileProbe().run(subject)
    assert clock() - start < 20  # the child was killed, not waited for (it sleeps 30 s)
    assert report.status == "compile_timeout" and report.stage == "compile"
    found = report.findings["compile"]
    assert found["cold"]["status"] == "compile_timeout"
    assert cm.is_unavailable(found["warm"]["status"])
    assert "compile_cold_first_step_s" not in report.metrics


def test_child_is_held_to_the_case_deadline(tmp_path):
    spec = spec_for("planted", "planted/slow_compile", task="cold")
    outcome = Child(spec, None, str(tmp_path)).finish(clock() + 4, None)
    assert outcome.ended == "deadline" and outcome.elapsed_s < 10
    report = build_report({"cold": child_findings(outcome, RunConfig())}, "eager", RunConfig())
    assert cm.is_unavailable(report.findings["compile"]["cold"]["status"])
    assert report.status is None  # the probe stopped itself: no invented status


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
@pytest.mark.parametrize("probes", ["none", "compile"])
def test_compile_timeout_ends_one_case_and_the_sweep_goes_on(run_json, probes):
    # The eager backend keeps compile_wrong's own compile well inside the limit on a busy box.
    # With the probe, the ladder's compile is the cold one, in a worker of its own.
    out = run_json(
        "--suite",
        "planted",
        "--cases",
        "slow_compile,compile_wrong",
        "--modes",
        "compile",
        "--compile-timeout",
        "3",
        "--compile-backend",
        "eager",
        "--probes",
        probes,
    )
    by_case = {r["case"]: r for r in out["results"]}
    slow = by_case["planted/slow_compile"]
    assert (slow["status"], slow["stage"]) == ("compile_timeout", "compile")
    assert by_case["planted/compile_wrong"]["status"] == "accuracy_fail"  # it still ran
    if probes == "compile":
        rows = {row[0]: row for row in out["views"]["compile"]["rows"]}
        assert rows["planted/slow_compile"][1] == {"limit": 3, "status": "compile_timeout"}
        assert rows["planted/compile_wrong"][1] > 0  # its cold figure, a number in seconds


# -- cold and warm in fresh processes ------------------------------------------------------------
@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_warm_run_hits_the_cache_and_waits_less_than_cold(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the children import TINY from tests/
    subject = subject_for(f"workload/{TINY}", suite="workload", workload=TINY)
    report = CompileProbe().run(subject)
    assert report.error is None, report.error
    found = report.findings["compile"]
    cold, warm = found["cold"], found["warm"]
    assert cold["cache"]["fxgraph_cache_miss"] >= 1 and cold["cache"]["fxgraph_cache_hit"] == 0
    assert warm["cache"]["fxgraph_cache_hit"] >= 1 and warm["cache"]["fxgraph_cache_miss"] == 0
    assert found["warm_proven"] is True
    assert warm["first_step_s"] < cold["first_step_s"]
    metrics = report.metrics
    assert metrics["compile_warm_first_step_s"] < metrics["compile_cold_first_step_s"]
    assert metrics["compile_eager_first_step_s"] > 0
    assert metrics["compile_cold_inductor_s"] > 0  # the phase breakdown is there


# -- in a sweep: the ladder's first compiled step is the cold one -------------------------------
def test_only_the_compile_probe_asks_for_cold_workers():
    assert cold_worker_modes(RunConfig(probes=("compile", "perf"))) == ("compile",)
    assert cold_worker_modes(RunConfig(probes=("placement", "perf"))) == ()
    assert cold_worker_modes(RunConfig(modes=("eager",), probes=("compile",))) == ()


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_sweep_measures_cold_in_the_ladder_and_warm_in_one_child(db, tmp_path):
    proc = torchport(
        "run",
        "--suite",
        "workload",
        "--workload",
        TINY,
        "--modes",
        "compile",
        "--probes",
        "compile",
        "--db",
        db,
        "--json",
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [result] = json.loads(proc.stdout)["results"]
    assert result["status"] == "pass", result.get("error")
    found = result["findings"]["compile"]
    cold, warm = found["cold"], found["warm"]
    assert cold["measured_by"] == "ladder" and warm["measured_by"] == "child"
    assert cold["first_step_s"] == result["durations"]["compile_s"]  # not compiled twice
    assert cold["cache"]["fxgraph_cache_miss"] >= 1 and cold["cache"]["fxgraph_cache_hit"] == 0
    assert warm["cache"]["fxgraph_cache_hit"] >= 1 and found["warm_proven"] is True
    assert warm["first_step_s"] < cold["first_step_s"]
    assert result["metrics"]["compile_cold_inductor_s"] > 0


# -- end to end: run, store, view ----------------------------------------------------------------
def test_run_records_compile_findings_and_show_prints_them(run_json):
    out = run_json(
        "--suite",
        "planted",
        "--cases",
        "graph_break",
        "--modes",
        "compile",
        "--probes",
        "compile",
        "--compile-backend",
        "eager",
    )
    [result] = out["results"]
    found = result["findings"]["compile"]
    assert found["cold"]["status"] == "ok" and found["warm"]["status"] == "ok"
    assert found["cold"]["measured_by"] == "ladder"
    assert result["metrics"]["compile_graph_break_count"] == 1
    view = out["views"]["compile"]
    [row] = view["rows"]
    assert row[0] == "planted/graph_break" and row[5]["count"] == 1
    assert row[5]["where"].startswith("planted.py:")
    assert any("needed more than one graph" in n and n.startswith("1 / 1") for n in view["notes"])


def _result(case, cold_s, graphs, warm_s=1.0, proven=True):
    return {
        "case": case,
        "mode": "compile",
        "status": "pass",
        "findings": {
            "compile": {
                "cold": {
                    "status": "ok",
                    "first_step_s": cold_s,
                    "eager_first_step_s": 0.1,
                    "graph_count": graphs,
                    "graphs": [{"ops": 3}] * graphs,
                },
                "warm": {
                    "status": "ok",
                    "first_step_s": warm_s,
                    "cache": {"fxgraph_cache_hit": 2, "autograd_cache_hit": 1},
                },
                "warm_proven": proven,
                "graph_breaks": [],
                "shapes": {
                    "status": "ok",
                    "studies": [
                        {
                            "dim": "seq",
                            "values": [32, 64],
                            "static": {"recompiles": 1},
                            "dynamic": {"recompiles": 0},
                        }
                    ],
                },
            }
        },
    }


def test_view_summarises_cold_compile_and_multi_graph_cases():
    results = [
        _result("a", 10.0, 1),
        _result("b", 30.0, 3),
        _result("c", 20.0, 2),
        {"case": "d", "mode": "eager", "status": "pass", "findings": {}},
        {
            "case": "e",
            "mode": "compile",
            "status": "compile_timeout",
            "findings": {
                "compile": {"cold": {"status": "compile_timeout"}, "compile_timeout_s": 3}
            },
        },
    ]
    view = compile_view.build({"config": {}}, results)
    assert [r[0] for r in view.rows] == ["a", "b", "c", "e"]
    assert view.rows[1][1:5] == [30.0, Annotated(1.0, "3 hits"), 0.1, Graphs(3, [3, 3, 3])]
    assert view.rows[0][5] == 0 and view.rows[0][6] == "seq 32,64: static 1, dynamic 0"
    assert view.rows[3][1] == Exceeded(3, "compile_timeout")
    notes = " | ".join(view.notes)
    assert "median 20.00 s, max 30.00 s over 3 / 4 cases" in notes
    assert "2 / 3 cases needed more than one graph" in notes
    assert compile_view.build({"config": {}}, results[3:4]) is None
    json.dumps(view.to_dict())  # the --json form
    assert Breaks(3, 2, "x.py:1") == Breaks(3, 2, "x.py:1")
