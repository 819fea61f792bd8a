"""The release note's compile wait (views/release_note.py): the compile probe's cold first
step where both runs have it, else the compile stage's duration every compiled result records;
judged against the wider of the 1.15x line and the one-shot noise each run measured (a case's
first eager step timed in both modes); "not measured" names the side with no compiled step;
runs whose compile caches started in different states are not judged."""

from __future__ import annotations

import pytest

from tests import kb
from torchport.kb import open_store
from torchport.views.release_note import compile_wait, release_note

CASES = ("smoke/mlp", "smoke/convnet", "hf/llama", "hf/gpt2")


def _results(compile_s: float, *, spread: float = 1.0, probe_s: float | None = None) -> list:
    """Two modes per case: the eager result's first step 1.0 s, the compile result's first
    eager step ``spread`` s (the same work timed again: the run's one-shot noise)."""
    out = []
    for case in CASES:
        out.append({"case": case, "mode": "eager", "status": "pass", "durations": {"run_s": 1.0}})
        compiled = {
            "case": case,
            "mode": "compile",
            "status": "pass",
            "durations": {"run_s": spread, "compile_s": compile_s, "compiled_run_s": 0.2},
        }
        if probe_s is not None:
            compiled["metrics"] = {"compile_cold_first_step_s": probe_s}
        out.append(compiled)
    return out


def _two_runs(tmp_path, a: list, b: list, caches=(None, None)) -> str:
    db = tmp_path / "kb.db"
    for run_id, results, cache in (("ra", a, caches[0]), ("rb", b, caches[1])):
        labels = {"team": "core"} if cache is None else {"compile_cache": cache}
        kb.build(db, run_id=run_id, results_=results, labels=labels)
    return str(db)


def test_compile_stage_judged_against_the_measured_one_shot_noise(tmp_path):
    # +30 %, past the 1.15x line, but each run's same-work timings differ by 1.4x: noise
    db = _two_runs(tmp_path, _results(10.0, spread=1.4), _results(13.0, spread=1.4))
    with open_store(db, write=False) as store:
        wait = compile_wait(store, "ra", "rb", ("old", "new"))
    assert wait["figure"] == "compile_s" and wait["pairs"] == len(CASES)
    assert wait["ratio"] == pytest.approx(1.3) and wait["noise"] == pytest.approx(1.4)
    assert wait["verdict"] == "within noise" and wait["line"] == pytest.approx(1.4)


def test_compile_stage_change_past_a_quiet_noise_is_slower(tmp_path):
    db = _two_runs(tmp_path, _results(10.0, spread=1.05), _results(13.0, spread=1.02))
    with open_store(db, write=False) as store:
        wait = compile_wait(store, "ra", "rb")
        note = release_note(store, "m", [("old", "ra", None), ("new", "rb", None)])
    assert wait["verdict"] == "slower" and wait["line"] == pytest.approx(1.15)
    assert wait["noise"] == pytest.approx(1.05)
    assert (
        "compile wait +30 % over 4 pairs (compile stage; slower against the 1.15x line)"
        in note.pairs[0].headline
    )


def test_the_compile_probe_figure_wins_where_both_have_it(tmp_path):
    db = _two_runs(tmp_path, _results(10.0, probe_s=20.0), _results(13.0, spread=1.0, probe_s=16.0))
    with open_store(db, write=False) as store:
        wait = compile_wait(store, "ra", "rb")
    assert wait["figure"] == "compile_cold_first_step_s"
    assert wait["ratio"] == pytest.approx(0.8) and wait["verdict"] == "faster"


def test_a_side_without_compiled_steps_is_not_measured(tmp_path):
    eager_only = [r for r in _results(10.0) if r["mode"] == "eager"]
    db = _two_runs(tmp_path, _results(10.0), eager_only)
    with open_store(db, write=False) as store:
        note = release_note(store, "m", [("old", "ra", None), ("new", "rb", None)])
    assert "compile wait not measured (new recorded no compiled step)" in note.pairs[0].headline


def test_compile_caches_in_different_states_are_not_judged(tmp_path):
    db = _two_runs(tmp_path, _results(10.0), _results(5.0), caches=("empty", "warm"))
    with open_store(db, write=False) as store:
        wait = compile_wait(store, "ra", "rb", ("old", "new"))
    assert wait["verdict"] == "not judged" and wait["ratio"] == pytest.approx(0.5)
    assert wait["why_not_judged"] == "compile caches started empty in old and warm in new"
