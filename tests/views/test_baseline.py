"""Baselines and the gate: regressions fail it, improvements are listed, tolerances apply."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import kb
from torchport.views.baseline import BaselineError, gate, load_baseline, make_baseline


def _r(case, status="pass", stage=None, median=None, mode="eager"):
    metrics = (
        {}
        if median is None
        else {
            "perf_median_ms": median,
            "perf_p10_ms": median * 0.95,
            "perf_p90_ms": median * 1.05,
            "perf_samples": 30,
        }
    )
    return {"case": case, "mode": mode, "status": status, "stage": stage, "metrics": metrics}


RUN = {
    "id": "base",
    "suite": "smoke",
    "device": "cpu",
    "labels": {},
    "plan": [[c, "eager"] for c in "abcdefgh"],
}
BASE = [
    _r("a", median=10.0),
    _r("b", "eager_fail", "run"),
    _r("c", "compile_fail", "compile"),
    _r("d", median=10.0),
    _r("e"),
    _r("f", "skip"),
    _r("g", median=10.0),
    _r("h"),
]


def test_gate_lists_regressions_and_improvements():
    baseline = make_baseline(RUN, BASE)
    assert baseline["entries"]["a|eager"]["perf_p90_ms"] == pytest.approx(10.5)
    new = [
        _r("a", median=13.0),  # slower beyond the noise
        _r("b"),  # now passes
        _r("c", "compiled_run_fail", "compiled_run"),  # got further up the ladder
        _r("d", median=10.2),  # within noise
        _r("e", "crash", "run"),  # now fails
        _r("f", "skip"),
        _r("g", median=7.0),  # faster
        _r("new"),
    ]  # not in the baseline; h not recorded
    report = gate(baseline, {"id": "r2", "plan": RUN["plan"]}, new)
    assert not report.ok
    assert [(i["case"], i["kind"]) for i in report.regressions] == [
        ("a", "step slower"),
        ("e", "now fails"),
        ("h", "missing (not recorded)"),
    ]
    assert [(i["case"], i["kind"]) for i in report.improvements] == [
        ("b", "now passes"),
        ("c", "got further"),
        ("g", "step faster"),
    ]
    assert report.unchanged == 2 and report.checked == 8 and report.new[0]["case"] == "new"
    assert "baseline p10-p90" in report.regressions[0]["test"]
    # its JSON form: the fields in order after ``ok``, as ``dataclasses.asdict`` gave them
    import dataclasses

    assert list(report.to_dict().items()) == [("ok", False), *dataclasses.asdict(report).items()]


def test_a_narrower_run_is_checked_on_what_it_planned_and_a_clean_run_passes():
    baseline = make_baseline(RUN, BASE)
    report = gate(baseline, {"id": "r3", "plan": [["a", "eager"]]}, [_r("a", median=10.1)])
    assert report.ok and report.checked == 1 and report.not_planned == 7


def test_the_plan_is_read_only_when_a_baseline_entry_has_no_result():
    """``gate`` reads a run without its plan (100 000 entries in a large sweep) and asks for
    it only when an expected (case, mode) was not recorded."""
    baseline = make_baseline(RUN, BASE)
    asked = []

    def plan():
        asked.append(1)
        return [[c, "eager"] for c in "abc"]

    report = gate(baseline, {"id": "r4"}, [dict(r) for r in BASE], plan=plan)
    assert report.ok and report.checked == 8 and asked == []
    report = gate(baseline, {"id": "r4"}, [_r("a", median=10.0)], plan=plan)
    assert asked == [1] and report.not_planned == 5
    assert [(i["case"], i["kind"]) for i in report.regressions] == [
        ("b", "missing (not recorded)"),
        ("c", "missing (not recorded)"),
    ]


@pytest.mark.parametrize(
    "old,new,kind",
    [
        (("eager_fail", "run"), ("build_fail", "build"), "stopped earlier"),
        (("timeout", "run"), ("crash", "run"), "failure changed"),
        (("pass", None), ("skip", None), "skipped (was run)"),
    ],
)
def test_failure_kinds_that_regress(old, new, kind):
    baseline = make_baseline(RUN, [_r("a", *old)])
    report = gate(baseline, {"id": "r", "plan": []}, [_r("a", *new)])
    assert [i["kind"] for i in report.regressions] == [kind]


def test_a_tolerance_in_the_file_replaces_the_measured_noise(tmp_path):
    baseline = make_baseline(RUN, [_r("a", median=10.0)], perf_tolerance=0.5)
    path = tmp_path / "expected.json"
    path.write_text(json.dumps(baseline))
    loaded = load_baseline(str(path))
    assert gate(loaded, {"id": "r", "plan": []}, [_r("a", median=14.0)]).ok
    loaded["entries"]["a|eager"]["perf_tolerance"] = 0.1
    report = gate(loaded, {"id": "r", "plan": []}, [_r("a", median=14.0)])
    assert "tolerance ±10%" in report.regressions[0]["test"]


@pytest.mark.parametrize(
    "text,needle",
    [
        ("not json", "not readable JSON"),
        ('{"format": "x"}', "not a torchport baseline"),
        ('{"format": "torchport-baseline/1", "entries": {"a": {}}}', "needs the form"),
        (
            '{"format": "torchport-baseline/1", "perf_tolerance": "10%", "entries": '
            '{"a|eager": {"status": "pass"}}}',
            "must be a fraction",
        ),
    ],
)
def test_a_bad_baseline_file_names_the_fix(tmp_path, text, needle):
    path = tmp_path / "expected.json"
    path.write_text(text)
    with pytest.raises(BaselineError, match=needle):
        load_baseline(str(path))
    with pytest.raises(BaselineError, match="no baseline file"):
        load_baseline(str(tmp_path / "missing.json"))


def test_the_store_rows_make_the_same_baseline_and_gate_as_the_results(kb_url, monkeypatch):
    """``baseline save`` and ``gate`` read the store's plain rows (``store.statuses``, from the
    outcomes index): the same expected file and the same report as from the whole results,
    on SQLite and PostgreSQL; the same report again when a forked child checks the later
    part of the cases (kb/forked.py)."""
    from torchport.interfaces.json_text import Raw, indented, indented_at
    from torchport.kb import forked, open_store
    from torchport.views.baseline import baseline_of_rows, baseline_texts, gate_rows, gate_run

    base = [*BASE, _r("a", median=4.0, mode="compile"), _r("z", "pass", "run", median=0.0)]
    base.append({**_r("y", median=8.0), "metrics": {"perf_median_ms": 8.0}})  # no spread
    new = [
        _r("a", median=13.0),
        _r("b"),
        _r("c", "compiled_run_fail", "compiled_run"),
        _r("d", median=10.2),
        _r("e", "crash", "run"),
        _r("g", median=7.0),
        _r("a", median=9.0, mode="compile"),
        _r("new"),
    ]
    with open_store(kb_url, write=True) as store:
        for run_id, results in (("base", base), ("next", new)):
            kb.add_run(store, run_id, results, plan=RUN["plan"], suite="smoke")
    with open_store(kb_url, write=False) as store:
        run = store.get_run("base", plan=False)
        for perf, tolerance in ((True, None), (False, None), (True, 0.05)):
            want = make_baseline(run, store.results(run_id="base", stream=True), perf=perf)
            want["perf_tolerance"] = tolerance
            got = baseline_of_rows(
                run, store._statuses_rows("base"), perf=perf, perf_tolerance=tolerance
            )
            assert got == want and list(got["entries"]) == list(want["entries"])
            nxt = store.get_run("next")
            report = gate_rows(got, nxt, store._statuses_rows("next"))
            assert report == gate(got, nxt, store.results(run_id="next", order="case", stream=True))
        monkeypatch.setattr(forked, "available", lambda: True)
        monkeypatch.setattr(forked, "cores", lambda: 2)
        store.pairs_per_part = 3  # two parts of the run's cases
        assert len(store._case_parts("next", 2)) == 2
        started = []
        child = forked.Child
        monkeypatch.setattr(forked, "Child", lambda work: started.append(1) or child(work))
        assert gate_run(store, got, nxt) == report and started == [1]
        # gate --json: each part's findings made text in its process, the same document
        entry = indented_at(2, indent=2)
        made = gate_run(store, got, nxt, entries=entry).to_dict()
        assert started == [1, 1] and any(type(x) is str for x in made["regressions"])
        made = {
            k: [Raw(x) if type(x) is str else x for x in v] if isinstance(v, list) else v
            for k, v in made.items()
        }
        assert indented(made) == json.dumps(report.to_dict(), indent=2)
        started.pop()  # the count below is of the baseline's parts
        # the file baseline save writes, made in two parts as well: the same entries, in order
        whole = baseline_of_rows(run, store._statuses_rows("base"))
        head, texts, timed = baseline_texts(store, run)
        assert started == [1, 1] and len(store._case_parts("base", 2)) == 2
        assert {**head, "entries": {k: json.loads(t) for k, t in texts}} == whole
        assert [k for k, _ in texts] == list(whole["entries"])
        assert timed == sum("perf_median_ms" in e for e in whole["entries"].values())
        assert not report.ok and report.regressions and report.improvements and report.new
    assert got["entries"]["a|eager"]["perf_p90_ms"] == pytest.approx(10.5)
    assert got["entries"]["b|eager"] == {"status": "eager_fail", "stage": "run"}


@given(
    status=st.text(),
    stage=st.one_of(st.none(), st.text()),
    figures=st.lists(
        st.one_of(st.floats(), st.integers(), st.booleans(), st.none(), st.text()),
        min_size=4,
        max_size=4,
    ),
)
def test_an_entry_is_written_as_json_dumps_writes_it(status, stage, figures):
    """The baseline file's entries are written without the encoder in their usual shapes
    (views/baseline.py entry_text): the text is json.dumps' for any entry, hostile ones too."""
    from torchport.views.baseline import PERF_KEYS, entry_text

    shapes = [
        {"status": status},
        {"status": status, "stage": stage},
        {"status": status, **dict(zip(PERF_KEYS, figures, strict=True))},
        {"status": status, **dict(zip(PERF_KEYS[:2], figures, strict=False))},
    ]
    for entry in shapes:
        assert entry_text(entry) == json.dumps(entry)
