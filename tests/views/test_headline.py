"""A run's headline and verdict, and what a comparison and a search say about host ops, from
knowledge bases written through the store API (tests/kb.py)."""

from __future__ import annotations

import pytest

from tests import kb
from torchport.kb import open_store
from torchport.views.compare import compare_runs
from torchport.views.compare_placement import ALL_ON_HOST
from torchport.views.headline import (
    BAD,
    GOOD,
    WARN,
    headline,
    run_headline,
    run_headlines,
    verdict_view,
)
from torchport.views.search_more import host_op_hits, label_hits, more_hits

CLASSED = {
    "host_ops": [
        {"op": "aten.cumsum.default", "evidence_class": "a"},
        {"op": "aten.flip.default", "evidence_class": "b"},
    ]
}


def _device_results() -> list[dict]:
    """The sample results with evidence classes on the fallback result's host ops."""
    out = kb.results()
    for r in out:
        if r.get("grade") == "fallback":
            r["findings"] = {**r["findings"], **CLASSED}
    return out


@pytest.fixture
def two_runs(tmp_path):
    """A CPU run with no placement grades, and a device run whose results fell back."""
    path = tmp_path / "kb.db"
    bare = [
        {k: v for k, v in r.items() if k != "grade"}
        | {"findings": {k: v for k, v in r["findings"].items() if k not in ("ops", "fallback_ops")}}
        for r in kb.results()
    ]
    kb.build(path, run_id="cpu-run", results_=bare, labels={"release": "a"})
    kb.build(path, run_id="dev-run", results_=_device_results(), labels={"release": "simdev-b"})
    return str(path)


def test_headline_counts_fallbacks_and_distinct_ops_by_class(two_runs):
    with open_store(two_runs, write=False) as store:
        head = run_headline(store, store.get_run("dev-run", plan=False))
    assert (head.recorded, head.planned, head.passed) == (8, 8, 3)
    assert (head.accuracy_fail, head.skipped, head.other_fail) == (1, 2, 2)
    # mlp [compile] graded fallback (4 ops) and gpt2 [compile] graded host (no op table)
    assert head.host_results == 2
    assert head.ops_by_class() == {
        "a": ["aten.cumsum.default"],
        "b": ["aten.flip.default"],
        "?": ["aten.all.default", "aten.sort.default"],
    }
    # one case timed in both modes: eager 2.71 ms, compiled 46.8 ms
    assert head.timed_pairs == 1 and head.speedup == pytest.approx(2.71 / 46.8)
    assert head.compile_wait_s is None
    tones = {p.name: p.tone for p in head.parts()}
    assert tones == {
        "passed": WARN,
        "accuracy": BAD,
        "fallback": WARN,
        "compile_wait": "none",
        "speedup": WARN,
    }
    assert "2 host fallback (4 ops; class a: 1, b: 1, ?: 2)" in head.text()
    assert head.to_dict()["badges"]["fallback"]["tone"] == WARN


def test_headline_of_a_clean_run_is_all_good():
    counts = {"statuses": {"pass": 4}, "grades": {"on_device": 4}, "host_results": 0}
    figures = {"compile_wait_s": 3.0, "compiled": 1, "speedup": 2.0, "timed_pairs": 1}
    head = headline(counts, 4, figures)
    assert [p.tone for p in head.parts()] == [GOOD, GOOD, GOOD, "info", GOOD]
    assert head.text() == (
        "4/4 pass · 0 accuracy fail · 0 host fallback · compile wait 3 s (median of 1) · "
        "compiled x2.00 (median of 1)"
    )


def test_listing_leaves_medians_of_a_large_run_to_its_page(two_runs, monkeypatch):
    monkeypatch.setattr("torchport.views.headline.FIGURES_UP_TO", 4)
    with open_store(two_runs, write=False) as store:
        heads = run_headlines(store, store.runs())
    assert set(heads) == {"cpu-run", "dev-run"}
    assert not heads["dev-run"].figures_read
    assert "speedup: on the run's page" in heads["dev-run"].text()
    assert heads["cpu-run"].host_results == 0


def test_verdict_answers_the_five_questions(two_runs):
    with open_store(two_runs, write=False) as store:
        head = run_headline(store, store.get_run("dev-run", plan=False))
        cpu_head = run_headline(store, store.get_run("cpu-run", plan=False))
    view = verdict_view(head, device="simdev")
    assert [r[0] for r in view.rows] == [
        "runs?",
        "matches?",
        "on the device?",
        "wait before the first step?",
        "how fast?",
    ]
    answers = {r[0]: r[1] for r in view.rows}
    assert answers["runs?"] == "4 / 6 results ran; 2 stopped with an error; 2 skipped"
    assert answers["on the device?"].startswith("no: 2 results fell back to the host, 4 distinct")
    assert "class a: aten.cumsum.default" in answers["on the device?"]
    cpu = verdict_view(cpu_head, device="cpu")
    assert cpu.rows[2][1] == "the CPU is the host: placement is not graded"
    # a CPU run whose results were graded (synthetic, or a placement probe run on purpose)
    # still shows its host fallbacks
    assert verdict_view(head, device="cpu").rows[2][1].startswith("no: 2 results fell back")


def test_compare_against_a_cpu_run_names_the_device_sides_host_ops(two_runs):
    with open_store(two_runs, write=False) as store:
        cmp = compare_runs(store, "cpu-run", "dev-run")
    summary = cmp.placement_summary
    assert summary["basis"] == f"a: {ALL_ON_HOST}"
    assert not summary["a"]["graded"] and summary["b"]["graded"]
    assert list(summary["b"]["host_ops"])[:2] == ["aten.cumsum.default", "aten.flip.default"]
    assert summary["still_on_host"] == list(summary["b"]["host_ops"])
    remark = [r for r in cmp.remarks if r.startswith("placement:")]
    assert len(remark) == 1 and "run A (cpu-run, device cpu) has no placement data" in remark[0]
    assert "2 results fell back to the host, 4 ops ran there" in remark[0]
    assert cmp.to_dict()["placement_summary"]["basis"] == f"a: {ALL_ON_HOST}"


def test_compare_of_two_graded_runs_names_ops_added_and_gone(tmp_path):
    path = tmp_path / "kb.db"
    kb.build(path, run_id="r1", results_=_device_results())
    later = _device_results()
    for r in later:
        if r.get("grade") == "fallback":
            ops = dict(r["findings"]["fallback_ops"])
            ops.pop("aten.sort.default")
            ops["aten.nonzero.default"] = 1
            r["findings"] = {**r["findings"], "fallback_ops": ops}
        if r.get("grade") == "host":
            r["grade"] = "on_device"
    kb.build(path, run_id="r2", results_=later)
    with open_store(str(path), write=False) as store:
        summary = compare_runs(store, "r1", "r2").placement_summary
    assert summary["basis"] == "graded"
    assert summary["added"] == ["aten.nonzero.default"]
    assert summary["gone"] == ["aten.sort.default"]
    assert summary["grades_changed"] == {"host": [1, 0], "on_device": [2, 3]}


def test_search_finds_host_ops_by_short_name_and_runs_by_label(two_runs):
    with open_store(two_runs, write=False) as store:
        runs = {r["id"]: r for r in store.runs()}
        views = host_op_hits(store, "cumsum", runs, 10)
        assert views["host_op_runs"].rows[0][0] == "dev-run"
        assert views["host_op_results"].rows[0][:3] == ["smoke/mlp", "compile", "dev-run"]
        assert host_op_hits(store, "no_such_op", runs, 10) == {}
        assert host_op_hits(store, "cumsum OR 1=1", runs, 10) == {}  # not an op name
        labelled = label_hits("simdev", list(runs.values()))
        assert labelled is not None and [r[0] for r in labelled.rows] == ["dev-run"]
        assert set(more_hits(store, "aten::cumsum", 5)) == {"host_op_runs", "host_op_results"}


def test_medians_are_ranked_in_the_database(kb_url):
    """Even counts average the two middle values; a case timed in one mode or failed in one
    is left out of the speedup; nothing timed gives None with a count of 0. On each engine
    (PostgreSQL's by percentile_disc, records/dialect.py Dialect.median)."""

    def result(case: str, mode: str, step: float, status: str = "pass", cold=None) -> dict:
        metrics = {"perf_median_ms": step}
        if cold is not None:
            metrics["compile_cold_first_step_s"] = cold
        return {"case": case, "mode": mode, "status": status, "metrics": metrics}

    rows = [
        result("a", "eager", 4.0),
        result("a", "compile", 2.0, cold=10.0),  # x2
        result("b", "eager", 3.0),
        result("b", "compile", 3.0, cold=30.0),  # x1
        result("c", "eager", 8.0),
        result("c", "compile", 2.0, cold=20.0),  # x4
        result("d", "eager", 9.0),
        result("d", "compile", 1.0, status="accuracy_fail", cold=40.0),  # not a pair
        result("e", "eager", 5.0),
    ]
    path = kb.build(kb_url, results_=rows)
    kb.build(path, run_id="empty", results_=[])
    kb.build(path, run_id="odd", results_=rows[:6])  # cold 10, 20, 30; speedups 1, 2, 4
    with open_store(path, write=False) as store:
        assert store.headline("odd", figures=True) == {
            "compile_wait_s": 20.0,
            "compiled": 3,
            "speedup": 2.0,
            "timed_pairs": 3,
        }
        assert store.headline("r1", figures=True) == {
            "compile_wait_s": 25.0,  # 10, 20, 30, 40
            "compiled": 4,
            "speedup": 2.0,  # 1, 2, 4
            "timed_pairs": 3,
        }
        assert store.headline("empty", figures=True) == {
            "compile_wait_s": None,
            "compiled": 0,
            "speedup": None,
            "timed_pairs": 0,
        }


def test_a_run_with_no_placement_grades_says_so():
    head = headline({"statuses": {"pass": 2}, "grades": {}, "host_results": 0}, 2, None)
    fallback = next(p for p in head.parts() if p.name == "fallback")
    assert (fallback.text, fallback.tone) == ("placement not graded", "none")
    assert verdict_view(head, device="simdev").rows[2][1].startswith("not known: placement")
