"""``torchport evaluate``'s library side on real runs, kept small for the default suite: a
sub-plan of the protocol (smoke/mlp eager on simdev and on the CPU), its scorecard checked
answer by answer against the runs' records, a budget that stops a part and a resume that
finishes it, and a second evaluation with a planted wrong kernel shown under "since the last
evaluation". The whole command with a real budget is the slow test at the end."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import torchport
from torchport.interfaces import evaluation as ev
from torchport.interfaces.cli import UsageProblem
from torchport.interfaces.cli.evaluate_cmd import parse_budget
from torchport.kb import open_store
from torchport.views.coverage import case_passed
from torchport.views.evaluation import Plan, PlannedPart, load_group
from torchport.views.scorecard import scorecard

MODEL = {"suite": "smoke", "probes": ("placement", "perf")}


def _part(side: str, device: str) -> PlannedPart:
    return PlannedPart("smoke", side, device, "runs?", dict(MODEL), ["smoke/mlp"], ["eager"],
                       30.0, 0)  # fmt: skip


def _plan(evaluation: str, budget_s: float, *, against: bool) -> Plan:
    plan = Plan(evaluation, "simdev", "cpu" if against else None, budget_s, [])
    plan.parts = [_part("device", "simdev")] + ([_part("reference", "cpu")] if against else [])
    plan.left_out = [{"part": "dist", "side": "device", "why": "out of time: needs ~110 s"}]
    return plan


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """ev-a: simdev against the CPU; ev-b: simdev with addmm planted wrong, first stopped by
    its budget, then resumed."""
    mp = pytest.MonkeyPatch()
    mp.setattr(ev, "PERF_BUDGET_S", 0.3)  # enough samples to judge the noise, less to wait
    db = tmp_path_factory.mktemp("evaluate") / "kb.db"
    store = open_store(str(db), write=True)
    started = time.monotonic()
    first = ev.evaluate(store, _plan("ev-a", 600, against=True))
    first_s = time.monotonic() - started
    mp.setenv("TORCHPORT_SIMDEV_WRONG_OPS", "addmm")  # mlp's Linear layers: wrong numbers
    mp.setattr(ev, "RESERVE_S", 0.0)  # the budget's timer fires half a second into the part
    stopped = ev.evaluate(store, _plan("ev-b", 0.5, against=False))
    stopped_card = scorecard(store, "ev-b")
    resumed = ev.evaluate(store, resume="ev-b", budget_s=600)
    mp.undo()
    yield {
        "store": store,
        "first": first,
        "first_s": first_s,
        "stopped": stopped,
        "stopped_card": stopped_card,
        "resumed": resumed,
    }
    store.close()


def test_the_plan_ran_as_one_labelled_group_within_its_budget(evaluated):
    first = evaluated["first"]
    assert first.state == "complete" and len(first.runs) == 2
    assert evaluated["first_s"] <= 600
    group = load_group(evaluated["store"], "ev-a")
    assert set(group.runs) == {("smoke", "device"), ("smoke", "reference")}
    assert {r["device"] for r in group.runs.values()} == {"simdev", "cpu"}
    planned = json.loads(json.dumps(_plan("ev-a", 600, against=True).to_dict()))
    assert group.plan.to_dict() == planned  # the plan as printed, from the group's note


def test_every_answer_matches_the_runs_records(evaluated):
    store = evaluated["store"]
    card = scorecard(store, "ev-a")
    answers = {a.question: a for a in card.answers}
    group = load_group(store, "ev-a")
    device = store.results(run_id=group.run_of("smoke")["id"])
    reference = store.results(run_id=group.run_of("smoke", "reference")["id"])

    eager = answers["runs eager?"]
    passed = sum(case_passed([r], "run", "eager") for r in device)
    families: dict = {}
    for r in device:  # each family the results recorded, passed of its cases
        for tag in r["findings"].get("tags") or ():
            family = families.setdefault(tag, {"passed": 0, "cases": 0})
            family["passed"] += case_passed([r], "run", "eager")
            family["cases"] += 1
    assert families  # smoke/mlp records its family
    assert eager.figures == {"passed": passed, "cases": len(device), "by_family": families}
    assert f"{passed} of {len(device)} cases ran eager" in eager.answer
    assert eager.tone == ("good" if passed == len(device) else "bad")
    assert {e["run"] for e in eager.evidence} == {group.run_of("smoke")["id"]}

    matches = answers["numbers match the CPU float64 reference?"]
    wrong = sum(r["status"] == "accuracy_fail" for r in device)
    assert matches.figures["accuracy_fail"] == wrong
    assert matches.figures["passed"] == sum(r["status"] == "pass" for r in device)

    placed = answers["stays on the device?"]
    host = [r for r in device if r.get("grade") in ("fallback", "host")]
    assert placed.figures["graded"] == sum(1 for r in device if r.get("grade"))
    assert placed.figures["host_results"] == len(host)

    speed = answers["speed against the reference device?"]
    (mine,), (theirs,) = device, reference
    ratio = theirs["metrics"]["perf_median_ms"] / mine["metrics"]["perf_median_ms"]
    assert speed.figures["pairs"] == 1
    assert speed.figures["median_speedup"] == pytest.approx(ratio)
    assert f"x{ratio:.2f}" in speed.answer

    assert answers["runs compiled?"].tone == "none"  # compile mode was not in the sub-plan
    assert answers["since the last evaluation of this device?"].tone == "none"
    left = {n["what"]: n["why"] for n in card.not_evaluated}
    assert left["dist (device)"].startswith("out of time")
    assert "runs compiled?" in left


def test_a_spent_budget_stops_the_part_and_resume_finishes_it(evaluated):
    stopped = evaluated["stopped"]
    assert (stopped.state, stopped.stopped_by) == ("interrupted", "budget")
    not_done = {n["what"] for n in evaluated["stopped_card"].not_evaluated}
    assert "smoke (device)" in not_done
    resumed = evaluated["resumed"]
    assert resumed.state == "complete" and resumed.runs == stopped.runs  # the same run, finished
    run = evaluated["store"].get_run(resumed.runs[0])
    assert run["state"] == "complete"


def test_a_planted_regression_shows_since_the_last_evaluation(evaluated):
    card = scorecard(evaluated["store"], "ev-b")
    since = {a.question: a for a in card.answers}["since the last evaluation of this device?"]
    assert card.previous == "ev-a"
    assert since.tone == "bad"
    assert since.figures["new_failures"] == ["smoke/mlp [eager] accuracy_fail"]
    assert "new failures: smoke/mlp [eager]" in since.answer
    assert (
        "not evaluated: no reference device"
        in {a.question: a for a in card.answers}["speed against the reference device?"].answer
    )


def test_notes_sit_on_the_scorecard(evaluated):
    store = evaluated["store"]
    run = load_group(store, "ev-a").run_of("smoke")["id"]
    store.add_note(run, "accepted: simdev's host copies are the simulator's", author="lead")
    texts = [(n["author"], n["text"]) for n in scorecard(store, "ev-a").notes]
    assert texts == [("lead", "accepted: simdev's host copies are the simulator's")]


def test_the_scorecard_command_and_its_json_twin(evaluated, tmp_path):
    db = evaluated["store"].url
    proc = torchport("evaluate", "--scorecard", "ev-b", "--db", db, "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = json.loads(proc.stdout)["scorecard"]
    assert body["evaluation"] == "ev-b" and body["previous"] == "ev-a"
    assert [a["question"] for a in body["answers"]][0] == "runs eager?"
    report, compat = tmp_path / "card.html", tmp_path / "compat.tsv"
    proc = torchport(
        "evaluate", "--scorecard", "ev-b", "--db", db, "--report", str(report),
        "--compat", str(compat), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "since the last evaluation" in proc.stdout and "ev-a" in proc.stdout
    assert "new failures: smoke/mlp [eager]" in report.read_text()
    lines = compat.read_text().splitlines()
    assert lines[0].startswith("op\tverdict") and lines[1:] == sorted(lines[1:])
    missing = torchport("evaluate", "--scorecard", "ev-nope", "--db", db, timeout=300)
    assert missing.returncode == 2 and "no evaluation 'ev-nope'" in missing.stderr


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=20))
def test_a_budget_is_a_duration_with_a_unit_or_one_clear_line(text):
    try:
        seconds = parse_budget(text)
    except UsageProblem as exc:
        assert "--budget" in str(exc) and "\n" not in str(exc)
    else:
        assert 60 <= seconds <= 7 * 24 * 3600


def test_budget_examples():
    assert parse_budget("20m") == 1200 and parse_budget("1h30m") == 5400
    for bad in ("30", "20 minutes", "-5m", "0s", "1e9h"):
        with pytest.raises(UsageProblem):
            parse_budget(bad)


@pytest.mark.slow
def test_evaluate_simdev_against_the_cpu_finishes_within_its_budget(tmp_path):
    """The whole command, planned from the protocol: the plan is printed first and the
    evaluation ends within --budget (measured around the process)."""
    db = tmp_path / "kb.db"
    started = time.monotonic()
    proc = torchport(
        "evaluate", "--device", "simdev", "--against", "cpu", "--budget", "6m",
        "--db", str(db), "--json", cwd=tmp_path, timeout=900,
    )  # fmt: skip
    wall_s = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Plan of evaluation" in proc.stderr
    body = json.loads(proc.stdout)
    assert wall_s <= 6 * 60 + 30  # the budget, and the process's own start and report
    card = body["scorecard"]
    assert card["plan_estimate_s"] <= 6 * 60
    assert {a["tone"] for a in card["answers"]} <= {"good", "warn", "bad", "info", "none"}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--device", "nope"], "unknown device 'nope'"),
        (["--device", "simdev", "--against", "simdev"], "--against names the device"),
        (["--device", "simdev", "--budget", "30"], "--budget '30' must be a duration"),
        pytest.param(
            ["--device", "simdev", "--workload", "nomod:fn"],
            "cannot import 'nomod'",
            marks=pytest.mark.slow,  # the factory is imported in a child: 10-25 s
        ),
        (["--resume", "ev-\x1b[31mred\nx"], "no knowledge base at"),
    ],
)
def test_bad_input_is_one_line_and_records_nothing(tmp_path, args, says):
    db = tmp_path / "kb.db"
    proc = torchport("evaluate", *args, "--db", str(db), timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "\x1b" not in proc.stderr
    assert not db.exists()


def test_resuming_a_finished_evaluation_runs_nothing(evaluated):
    db = evaluated["store"].url
    before = len(evaluated["store"].runs())
    proc = torchport("evaluate", "--resume", "ev-b", "--db", db, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "== smoke (device, simdev): already recorded" in proc.stdout
    assert "evaluation ev-b: complete" in proc.stdout
    assert len(evaluated["store"].runs()) == before
