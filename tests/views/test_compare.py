"""Comparing constructed runs with known transitions, and the noise rule for step times."""

import gc
import threading
import time

import pytest

from tests import kb
from tests.compare_oracle import compare
from torchport.views.compare_tables import comparison_views
from torchport.views.noise import judge


def _r(
    case, mode="eager", status="pass", stage=None, grade=None, metrics=None, ops=None, message=None
):
    return {
        "case": case,
        "mode": mode,
        "status": status,
        "stage": stage,
        "grade": grade,
        "metrics": metrics or {},
        "findings": {"fallback_ops": ops or {}},
        "error": {"type": "E", "message": message} if message else None,
    }


def _perf(median, spread=0.10, n=30):
    """A step time whose p10-p90 range is ``spread`` of the median wide."""
    return {
        "perf_median_ms": median,
        "perf_p10_ms": median * (1 - spread / 2),
        "perf_p90_ms": median * (1 + spread / 2),
        "perf_samples": n,
    }


def _run(run_id, plan, state="complete", suite="smoke"):
    return {
        "id": run_id,
        "suite": suite,
        "device": "cpu",
        "state": state,
        "labels": {},
        "started_at": "t",
        "plan": plan,
    }


def _sorted(results):
    return sorted(results, key=lambda r: (r["case"], r["mode"]))


@pytest.mark.parametrize(
    "ratio,verdict",
    [(1.03, "within noise"), (0.97, "within noise"), (1.30, "slower"), (0.70, "faster")],
)
def test_a_change_is_judged_against_the_measured_spread(ratio, verdict):
    judged = judge(_perf(10.0), _perf(10.0 * ratio))
    assert judged.verdict == verdict
    assert "p10-p90" in judged.test  # the test that decided is named


def test_a_wide_spread_hides_what_a_narrow_one_shows():
    assert judge(_perf(10.0, spread=0.8), _perf(13.0, spread=0.8)).verdict == "within noise"
    assert judge(_perf(10.0, spread=0.02), _perf(10.5, spread=0.02)).verdict == "slower"
    floor = judge(_perf(10.0, spread=0.001), _perf(10.1, spread=0.001))
    assert floor.verdict == "within noise" and "2% floor" in floor.test


def test_without_spread_or_samples_nothing_is_judged_and_a_file_tolerance_decides():
    assert judge(_perf(10.0, n=3), _perf(30.0)).verdict == "not judged"
    assert judge({"perf_median_ms": 10.0}, {"perf_median_ms": 30.0}).verdict == "not judged"
    assert (
        judge({"perf_median_ms": 10.0}, {"perf_median_ms": 10.3}, tolerance=0.02).verdict
        == "slower"
    )
    assert judge({"perf_median_ms": 10.0}, {}) is None


def _runs():
    plan_a = [
        ["a", "eager"],
        ["b", "eager"],
        ["c", "eager"],
        ["d", "eager"],
        ["e", "eager"],
        ["f", "eager"],
        ["g", "eager"],
        ["x", "eager"],
    ]
    a = [
        _r("a"),
        _r("b", status="eager_fail", stage="run", message="boom 1"),
        _r("c", status="compile_fail", stage="compile"),
        _r("d", metrics=_perf(10.0)),
        _r("e", grade="fallback", ops={"aten.cumsum.default": 2}),
        _r(
            "f",
            metrics={
                "parity_rmse_ratio": 1.0,
                "compile_cold_first_step_s": 10.0,
                "perf_peak_bytes": 100,
            },
        ),
        _r("g", metrics=_perf(10.0)),
        _r("x"),
    ]
    # B was interrupted: it planned x and y but recorded neither.
    plan_b = plan_a + [["y", "eager"]]
    b = [
        _r("a", status="crash", stage="run", message="worker died: signal 11"),
        _r("b"),
        _r("c", status="compiled_run_fail", stage="compiled_run"),
        _r("d", metrics=_perf(13.0)),
        _r("e", grade="fallback", ops={"aten.sort.default": 1}),
        _r(
            "f",
            metrics={
                "parity_rmse_ratio": 40.0,
                "compile_cold_first_step_s": 12.0,
                "perf_peak_bytes": 150,
            },
        ),
        _r("g", metrics=_perf(10.3)),
        _r("z"),
    ]
    return _run("A", plan_a), a, _run("B", plan_b, state="interrupted"), b


def test_compare_constructed_runs_with_known_transitions():
    run_a, a, run_b, b = _runs()
    cmp = compare(
        run_a,
        _sorted(a),
        run_b,
        _sorted(b),
        env_a={"torch": "2.13.0", "os": "x"},
        env_b={"torch": "2.14.0", "os": "x"},
    )
    assert cmp.common == 7 and cmp.only_a == [["x", "eager"]] and cmp.only_b == [["z", "eager"]]
    assert cmp.unrecorded_b == 1 and cmp.unrecorded_a == 0  # x was planned by B, not recorded
    assert cmp.transitions == {
        "pass": {"crash": 1, "pass": 4},
        "eager_fail": {"pass": 1},
        "compile_fail": {"compiled_run_fail": 1},
    }
    assert [(e["case"], e["after"]) for e in cmp.newly_failing] == [("a", "crash")]
    assert cmp.newly_failing[0]["error"] == "worker died: signal 11"
    assert [e["case"] for e in cmp.newly_passing] == ["b"]
    assert [(e["case"], e["before"], e["after"]) for e in cmp.failure_changed] == [
        ("c", "compile_fail", "compiled_run_fail")
    ]
    assert cmp.host_ops == {
        "aten.sort.default": {"added": [["e", "eager"]], "removed": []},
        "aten.cumsum.default": {"added": [], "removed": [["e", "eager"]]},
    }
    assert [(p["case"], p["metric"]) for p in cmp.parity] == [("f", "parity_rmse_ratio")]
    assert [(p.case, p.verdict) for p in cmp.perf] == [("d", "slower")]  # g: 3% in a 10% spread
    assert cmp.perf_verdicts == {"slower": 1, "within noise": 1}
    assert [(c["case"], c["verdict"]) for c in cmp.compile] == [("f", "slower")]  # 1.2x > 1.15
    assert [m["case"] for m in cmp.memory] == ["f"]
    assert cmp.environment == [{"key": "torch", "a": "2.13.0", "b": "2.14.0"}]
    assert any(
        "run B (B) is interrupted" in r and "1 pairs it planned are missing" in r
        for r in cmp.remarks
    )


def test_the_environment_difference_comes_first_and_lists_are_capped():
    run_a, a, run_b, b = _runs()
    cmp = compare(
        run_a,
        _sorted(a),
        run_b,
        _sorted(b),
        env_a={"torch": "2.13.0"},
        env_b={"torch": "2.14.0"},
        notes=[
            {
                "run_id": "B",
                "case": "a",
                "mode": None,
                "author": "ana",
                "created_at": "t",
                "text": "known segfault",
            }
        ],
    )
    views = comparison_views(cmp, limit=1)
    assert views[0].title.startswith("Environment difference")
    assert ["torch", "2.13.0", "2.14.0"] in views[0].rows
    titles = [v.title for v in views]
    assert "Newly failing (1)" in titles and "Notes (1)" in titles
    ops = next(v for v in views if v.title.startswith("Host ops"))
    assert len(ops.rows) == 1 and "1 more not shown" in ops.notes[-1]
    assert cmp.to_dict()["perf"][0]["verdict"] == "slower"  # the --json form


def _no_connection_left_over(store) -> bool:
    """Every connection ``store`` holds open is this thread's own or a spare one: none is
    left to a reading thread that has ended. Not a count: how many spares there are depends
    on the order the reading threads happened to end and lend theirs back (a thread's is lent
    back when its Thread object is collected), which another thread may still change; the
    count raced in CI (issue 44: 3 == 2). Waits for the read-ahead threads to end and
    collects them first (a guard against a hang, not a claim about timing)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
        t.name == "torchport-read-ahead" for t in threading.enumerate()
    ):
        time.sleep(0.01)
    gc.collect()
    mine, spare = store._conn(), getattr(store, "_spare", [])
    kept = {id(mine)} | {id(conn) for conn in spare}
    return len(spare) <= getattr(pg_store_module(), "SPARE_CONNECTIONS", 0) and all(
        id(conn) in kept for conn in store._conns
    )


def pg_store_module():
    try:
        from torchport.kb import pg_store
    except ImportError:  # no PostgreSQL driver: a SQLite store keeps no spare
        return None
    return pg_store


def test_the_store_join_decides_exactly_what_the_stream_walk_decides(kb_url, monkeypatch):
    """compare_runs lets the database return a superset of the pairs that may have changed;
    on random runs its answer equals walking both runs pair by pair in Python, also when a
    forked child shows the later part of the pairs (kb/forked.py). With a limit, the
    database decides every list itself and reads out only each list's first pairs: the
    tables shown are the same as from the whole comparison, on SQLite and PostgreSQL."""
    import random

    from torchport.interfaces.json_text import Raw, dumps, one_line
    from torchport.kb import forked, open_store
    from torchport.views.compare import ENTRY_LISTS, LIST_READS, compare_runs
    from torchport.views.compare_tables import list_length, list_view

    rng = random.Random(3)

    def result(case):
        status = rng.choice(("pass",) * 12 + ("eager_fail", "crash", "accuracy_fail"))
        median = rng.choice((None, 0.0) + (rng.uniform(1, 1.2),) * 10)
        spread = rng.choice((None, 0.001, 0.01, 0.05, 0.5))
        metrics = {}
        if median is not None:
            metrics["perf_median_ms"] = median
            metrics["perf_samples"] = rng.choice((3, 30, 30, 30))
            if spread is not None:
                metrics.update(perf_p10_ms=median * (1 - spread), perf_p90_ms=median * (1 + spread))
        for name in ("parity_rmse_ratio", "compile_cold_first_step_s", "perf_peak_bytes"):
            if rng.random() < 0.5:
                metrics[name] = rng.choice((0.0, 1.0, 1.1, 1.3, 20.0))
        ops = rng.choice(({}, {"aten.cumsum.default": 1}, {"aten.cumsum.default": 2}))
        return {
            "case": case,
            "mode": "eager",
            "status": status,
            "stage": None if status == "pass" else rng.choice(("run", "parity")),
            "grade": rng.choice((None, "on_device", "fallback")),
            "metrics": metrics,
            "findings": {"fallback_ops": ops},
            "error": None if status == "pass" else {"type": "E", "message": "boom\nx"},
        }

    path = kb_url
    with open_store(path, write=True) as store:
        for run_id in ("A", "B"):
            cases = [f"c{i:03d}" for i in range(300) if rng.random() < 0.95]
            kb.add_run(store, run_id, [result(c) for c in cases])
    with open_store(path, write=False) as store:
        joined = compare_runs(store, "A", "B").to_dict()
        a, b = store.get_run("A"), store.get_run("B")
        walked = compare(
            a,
            store.statuses("A", outcomes=True),
            b,
            store.statuses("B", outcomes=True),
            env_a={},
            env_b={},
        ).to_dict()
    assert joined["perf"] and joined["newly_failing"] and joined["placement"]
    assert {"within noise", "not judged"} <= set(joined["perf_verdicts"]) and joined["only_a"]
    assert joined == walked
    child = forked.Child
    with open_store(path, write=False) as store:  # most pairs never left the database
        shown = sum(len(part) for part in store.compare("A", "B")["parts"])
        whole = compare_runs(store, "A", "B")
        # counted (and read ahead) apart, then closed or kept spare (PostgreSQL): none left over
        assert _no_connection_left_over(store)
        paged = {n: compare_runs(store, "A", "B", limit=n) for n in (1, 3, 10_000)}
        store.compare_parts, store.pairs_per_part = 3, 50  # as two runs of 100 000 results
        assert len(store._case_ranges("A", store.results(run_id="A", count=True))) == 3
        in_parts = {n: compare_runs(store, "A", "B", limit=n) for n in (1, 3, 10_000)}
        assert _no_connection_left_over(store)  # each part's connection closed or spare
        # every pair: the later part shown by a forked child, its lists after this one's
        monkeypatch.setattr(forked, "cores", lambda: 2)
        monkeypatch.setattr(forked, "available", lambda: True)
        started = []
        monkeypatch.setattr(forked, "Child", lambda work: started.append(1) or child(work))
        in_children = compare_runs(store, "A", "B").to_dict()
        assert started == [1] and len(store._case_parts("A", 2)) == 2
        # compare --json: each part's entries made text in its own process, the same document
        line = one_line()
        as_text = compare_runs(store, "A", "B", entries=line).to_dict()
        assert started == [1, 1]
        del started[1:]
        one_list = {  # a list's own page: rows 3-4, only that list read out
            name: compare_runs(store, "A", "B", limit=4, rows=name) for name in LIST_READS
        }
        walked_pages = {name: _walk(store, name) for name in LIST_READS if name != "host_ops"}
    assert in_children == joined
    made = {k: [Raw(x) for x in v] if k in ENTRY_LISTS else v for k, v in as_text.items()}
    assert dumps(made, flat_from=2) == dumps(joined, flat_from=2)
    for name, rows in walked_pages.items():  # page after page, each read after the last key
        expected = list_view(whole, name, None)
        assert rows == (expected.rows if expected else []), name
    for name, cmp in one_list.items():
        got, expected = list_view(cmp, name, 2, offset=2), list_view(whole, name, 2, offset=2)
        assert (got and got.rows, got and got.notes) == (
            expected and expected.rows,
            expected and expected.notes,
        ), name
        assert list_length(cmp, name) == list_length(whole, name), name
    assert 0 < shown < joined["common"]

    def tables(cmp, limit):
        return [(v.title, v.rows, v.notes) for v in comparison_views(cmp, limit=limit)]

    for n, cmp in [*paged.items(), *in_parts.items()]:
        assert tables(cmp, n) == tables(whole, n), n
        assert cmp.perf_verdicts == whole.perf_verdicts and cmp.host_ops == whole.host_ops
    assert dict(paged[10_000].to_dict(), totals={}) == walked
    assert dict(in_parts[10_000].to_dict(), totals={}) == walked
    lists = ("newly_failing", "parity", "perf", "compile", "memory")
    assert all(len(walked[k]) > 3 for k in lists), {k: len(walked[k]) for k in lists}


def _walk(store, name: str, size: int = 3) -> list[list]:
    """Every row of list ``name``, ``size`` at a time, each page read after the last row
    of the one before (as the compare page's next link)."""
    from torchport.views.compare import compare_runs
    from torchport.views.compare_tables import after_row, list_view

    rows: list[list] = []
    after = None
    for _ in range(200):  # more pages than any list here holds rows: a loop fails, not hangs
        cmp = compare_runs(store, "A", "B", limit=size, rows=name, after=after)
        view = list_view(cmp, name, size, len(rows), len(rows))
        if view is None or not view.rows:
            return rows
        rows += view.rows
        after = after_row(name, view.rows[-1])
    raise AssertionError(f"list {name} did not end")


def test_host_op_changes_rank_by_evidence_class_from_the_store(kb_url):
    """The host-op class is stored beside the ops (host_ops column): compare ranks a
    dispatcher fallback (class a) before a warned one (class b) that more cases gained, on
    SQLite and PostgreSQL; the table names the class."""
    from torchport.kb import open_store
    from torchport.views.compare import compare_runs
    from torchport.views.compare_tables import host_ops_view

    def result(case, ops):
        classes = {"aten.cumsum.default": "a", "aten.gather.default": "b"}
        return {
            "case": case,
            "mode": "eager",
            "status": "pass",
            "stage": None,
            "grade": "fallback" if ops else "on_device",
            "metrics": {},
            "findings": {
                "fallback_ops": {op: 1 for op in ops},
                "host_ops": [
                    {"op": op, "device": "cpu", "count": 1, "evidence_class": classes[op]}
                    for op in ops
                ],
            },
            "error": None,
        }

    before = {"c1": [], "c2": [], "c3": []}
    after = {  # the warned gather gained in two cases, the silent cumsum in one
        "c1": ["aten.gather.default"],
        "c2": ["aten.gather.default"],
        "c3": ["aten.cumsum.default"],
    }
    with open_store(kb_url, write=True) as store:
        for run_id, ops in (("A", before), ("B", after)):
            kb.add_run(store, run_id, [result(c, o) for c, o in ops.items()])
    with open_store(kb_url, write=False) as store:
        cmp = compare_runs(store, "A", "B")
    assert cmp.host_ops["aten.cumsum.default"]["class"] == "a"
    assert cmp.host_ops["aten.gather.default"]["class"] == "b"
    rows = host_ops_view(cmp, None).rows
    assert [r[0] for r in rows] == ["aten.cumsum.default [a]", "aten.gather.default [b]"]


def _declare(monkeypatch, rule) -> None:
    """Add ``rule`` to records/figures.py FIGURE_RULES as if declared there: every module
    name (and list read) bound to the declared tuples, or made from them, is rebound."""
    import sys

    from torchport.records import figures

    made = {
        "FIGURE_RULES": (*figures.FIGURE_RULES, rule),
        "OUTCOME_FIGURES": figures.OUTCOME_FIGURES + ((rule.figure,) if not rule.column else ()),
        "PARITY_FIGURES": figures.PARITY_FIGURES + (rule.figure,),
    }
    old = {name: getattr(figures, name) for name in made}
    oracle = ("torchport.", "tests.compare_oracle")
    for module in [m for n, m in sys.modules.items() if n.startswith(oracle)]:
        for attr, value in list(vars(module).items()):
            for name, was in old.items():
                # (OUTCOME_FIGURES is KEY_FIGURES itself while every figure has a column)
                if value is was and (attr == name or name != "OUTCOME_FIGURES"):
                    monkeypatch.setattr(module, attr, made[name])
            if isinstance(value, dict):
                for key, item in value.items():
                    if item is old["PARITY_FIGURES"]:
                        monkeypatch.setitem(value, key, made["PARITY_FIGURES"])


def test_a_figure_read_from_the_metrics_is_compared_by_the_store(kb_url, monkeypatch):
    """A compared figure with no column (records/figures.py: read out of the stored metrics)
    is one declaration: the store decides it in SQL, on SQLite and PostgreSQL, beside a NaN
    metric that neither engine's JSON functions read, as the Python walk does, whole and in
    pages."""
    import math

    from torchport.kb import open_store
    from torchport.records.figures import PARITY_LINE, FigureRule
    from torchport.views.compare import compare_runs

    rule = FigureRule("parity_max_abs_err", "parity", *PARITY_LINE)
    assert not rule.column
    _declare(monkeypatch, rule)
    errors = {
        "c1": (1e-6, 1e-3),
        "c2": (1e-6, 2e-6),
        "c3": (None, 1.0),
        "c4": (1e-6, math.inf),
        "c5": (1e-6, 1e-3),
        "c6": (1e-6, math.nan),
    }
    with open_store(kb_url, write=True) as store:
        for side, run_id in enumerate("AB"):
            results = []
            for case, values in errors.items():
                metrics = {"loss": math.nan if case == "c5" else 1.0}
                if values[side] is not None:
                    metrics[rule.figure] = values[side]
                results.append(
                    {"case": case, "mode": "eager", "status": "pass", "metrics": metrics}
                )
            kb.add_run(store, run_id, results)
    with open_store(kb_url, write=False) as store:
        joined = compare_runs(store, "A", "B").to_dict()
        paged = compare_runs(store, "A", "B", limit=1)
        a, b = store.get_run("A"), store.get_run("B")
        walked = compare(
            a, store.statuses("A", outcomes=True), b, store.statuses("B", outcomes=True)
        ).to_dict()
        whole = compare(a, store.results(run_id="A"), b, store.results(run_id="B")).to_dict()
    listed = [(p["case"], p["metric"]) for p in joined["parity"]]
    assert listed == [(c, rule.figure) for c in ("c1", "c4", "c5")]
    assert joined == walked and whole["parity"] == joined["parity"]
    assert paged.totals["parity"] == 3 and len(paged.parity) == 1


def test_the_compare_read_reads_both_runs_as_the_store_s_own_reads_do(kb_url, monkeypatch):
    """The comparison reads its two runs itself (kb/reads/compare.py ``_two_runs``): the
    runs, first environments, notes and headlines it returns are those the store's reads of
    one run give, also where A is B; its ``version`` changes when a run gains a result, and
    ``unless`` that version returns the runs and fresh notes alone. A missing run and a
    driver error each leave as one line."""
    from torchport.kb import StoreError, open_store

    results = kb.results()
    with open_store(kb_url, write=True) as store:
        kb.add_run(store, "A", results)
        kb.add_run(store, "B", results[:-1], plan=[[r["case"], r["mode"]] for r in results])
        store.update_run("A", environment={"torch": "2.9", "device": "cpu"})
        store.update_run("A", environment={"torch": "2.10"})  # a second one: not the first
        store.update_run("B", environment={"torch": "2.11", "device": "cuda"})
        for run_id, text in (("B", "b1"), ("A", "a1"), ("B", "b2"), ("A", "a2")):
            store.add_note(run_id, text, author="ana")
    with open_store(kb_url, write=False) as store:
        for run_a, run_b in (("A", "B"), ("B", "A"), ("A", "A")):
            got = store.compare(run_a, run_b, limit=3)
            own = [store.get_run(r, plan=False, environments=True) for r in (run_a, run_b)]
            assert got["runs"] == tuple(
                {k: v for k, v in run.items() if k != "environments"} for run in own
            )
            assert got["environments"] == tuple(run["environments"][0] for run in own)
            assert got["notes"] == store.notes(run_id=run_a) + (
                store.notes(run_id=run_b) if run_b != run_a else []
            )
            assert got["headline"] == tuple(store.headline(r)[r] for r in (run_a, run_b))
            assert got["unchanged"] is False
        assert [n["text"] for n in store.compare("A", "B", limit=3)["notes"]] == [
            "a1",
            "a2",
            "b1",
            "b2",
        ]
        version = store.compare("A", "B", limit=3)["version"]
        n = len(results)
        assert version == (("complete", version[0][1], n), ("complete", version[1][1], n - 1))
        kept = store.compare("A", "B", limit=3, unless=version)
        assert kept["unchanged"] and set(kept) == {"runs", "notes", "version", "unchanged"}
        assert not store.compare("B", "A", limit=3, unless=version)["unchanged"]  # B's first
        with pytest.raises(StoreError, match=r"^no run 'nope' in .*\(latest is B;"):
            store.compare("A", "nope")
        real = store.q

        class Broken:  # the notes' statement names a table the file does not have
            def __getattr__(self, name):
                value = getattr(real, name)
                return (
                    value.replace("FROM notes", "FROM no_such_table")
                    if name == "NOTES_OF_RUNS"
                    else value
                )

        monkeypatch.setattr(store, "q", Broken())
        with pytest.raises(StoreError) as raised:
            store.compare("A", "B", limit=3)
        assert "no_such_table" in str(raised.value) and "\n" not in str(raised.value)
    with open_store(kb_url, write=True) as store:  # B resumed: a new version
        store.update_run("B", state="running")
        store.add_results("B", results[-1:])
        store.update_run("B", state="complete")
    with open_store(kb_url, write=False) as store:
        again = store.compare("A", "B", limit=3, unless=version)
        assert not again["unchanged"] and again["version"][1][2] == len(results)


def test_the_compare_read_issues_the_same_statements_whatever_the_runs_sizes(tmp_path):
    """A fixed few statements for a page of a comparison, whatever the runs hold: none per
    run, per result or per note (SQLite's trace of every statement the read runs)."""
    from torchport.kb import open_store

    def statements(size: int) -> list[str]:
        path = str(tmp_path / f"kb{size}.db")
        with open_store(path, write=True) as store:
            for run_id, fail in (("A", "pass"), ("B", "crash")):
                rows = [_r(f"c{i:04d}", status=fail if i % 3 else "pass") for i in range(size)]
                kb.add_run(store, run_id, rows)
                store.update_run(run_id, environment={"torch": run_id})
                for k in range(size // 10):
                    store.add_note(run_id, f"note {k}")
        traced: list[str] = []
        with open_store(path, write=False) as store:
            store._conn().set_trace_callback(traced.append)
            store.compare("A", "B", limit=5)
        return traced

    small, large = statements(20), statements(400)
    assert len(small) == len(large) <= 13, (len(small), len(large), large)  # 22 at fdb7d77
