"""The knowledge base at scale through the Store protocol: case globs in SQL (fnmatch's
meaning), paging, last status by indexed lookups, failure groups, notes, and the query plans
that keep a million results fast."""

import fnmatch
import random
import sqlite3

import pytest

from torchport.kb import StoreError, open_store
from torchport.records.globs import fnmatch_to_glob
from torchport.records.signature import error_signature


def _run(store, run_id="r1", device="cpu", labels=None, plan=None):
    store.create_run(
        run_id=run_id,
        command="torchport run",
        suite="smoke",
        device=device,
        config={},
        plan=plan or [],
        labels=labels or {},
    )


@pytest.fixture
def store(kb_url):
    """A knowledge base with run r1, on each engine (SQLite, PostgreSQL)."""
    s = open_store(kb_url, write=True)
    _run(s)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path):
    s = open_store(str(tmp_path / "kb.db"), write=True)
    _run(s)
    yield s
    s.close()


def test_globs_in_sql_match_what_fnmatch_matches():
    rng = random.Random(7)
    names = sorted(
        {"".join(rng.choice("ab-^!]/_[") for _ in range(rng.randint(0, 4))) for _ in range(300)}
    )
    conn = sqlite3.connect(":memory:")
    inexact = 0
    for _ in range(3000):
        pattern = "".join(rng.choice("ab-^!]*?[/_") for _ in range(rng.randint(1, 6)))
        glob, exact = fnmatch_to_glob(pattern)
        inexact += not exact
        for name in names:
            want = fnmatch.fnmatchcase(name, pattern)
            got = bool(conn.execute("SELECT ? GLOB ?", (name, glob)).fetchone()[0])
            assert got == want if exact else (got or not want), (pattern, glob, name)
    assert 0 < inexact < 100  # only sets that start with '^' are inexact


def test_paging_and_counts_with_exact_and_inexact_globs(store):
    cases = [f"hf/m{i:02d}" for i in range(30)] + ["hf/^x", "hf/ax"]
    store.add_results("r1", [{"case": c, "mode": "eager"} for c in cases])
    everything = [r["case"] for r in store.results()]
    assert everything == cases
    pages = [store.results(limit=7, offset=o) for o in range(0, 35, 7)]
    assert [r["case"] for page in pages for r in page] == cases
    assert store.results(case_glob="hf/m1*", count=True) == 10
    assert [r["case"] for r in store.results(case_glob="hf/m1*", limit=3, offset=8)] == [
        "hf/m18",
        "hf/m19",
    ]
    # '[^x]' is the set {^, x} in fnmatch: an inexact GLOB, filtered and paged in Python.
    assert [r["case"] for r in store.results(case_glob="hf/[^a]x")] == ["hf/^x", "hf/ax"]
    assert [r["case"] for r in store.results(case_glob="hf/[^a]x", offset=1)] == ["hf/ax"]
    assert store.results(case_glob="hf/[^a]x", count=True) == 2
    assert [
        r["case"] for r in store.results(order="case", case_glob="hf/m0[!0-7]", stream=True)
    ] == [
        "hf/m08",
        "hf/m09",
    ]


def test_last_status_per_case_by_lookups_matches_the_full_pass(store):
    store.add_results(
        "r1", [{"case": "a", "mode": "compile", "status": "compile_fail", "stage": "compile"}]
    )
    store.add_results("r1", [{"case": "a", "mode": "eager", "status": "pass"}])
    store.add_results("r1", [{"case": "b", "mode": "compile", "status": "crash"}])
    _run(store, "r2", device="cuda")
    store.add_results("r2", [{"case": "a", "mode": "compile", "status": "oom"}])
    store.add_results(
        "r2", [{"case": "b", "mode": "eager", "status": "eager_fail", "stage": "run"}]
    )
    every = store.history()
    assert every == {"a": "pass", "b": "eager_fail"}
    assert store.history(cases=["a", "b", "zz"]) == every
    assert (
        store.history(device="cpu", cases=["a", "b"])
        == store.history(device="cpu")
        == {"a": "pass", "b": "crash"}
    )
    assert store.history(device="cuda", cases=["a", "b"]) == {
        "a": "oom",
        "b": "eager_fail",
    }


def test_signatures_take_numbers_out_but_keep_op_names():
    a = error_signature("RuntimeError", "shape [2, 64] vs [2, 32] at 0x7f00ab\nmore")
    b = error_signature("RuntimeError", "shape [4, 128] vs [4, 16] at 0x7e11cd")
    assert a == b == "RuntimeError: shape [N, N] vs [N, N] at 0x?"
    assert error_signature("E", "conv2d failed") != error_signature("E", "conv1d failed")
    assert error_signature(None, None) is None


def test_failure_groups_most_common_and_worst_first(store):
    rows = [
        {
            "case": f"c{i}",
            "mode": "eager",
            "status": "eager_fail",
            "stage": "run",
            "error": {"type": "RuntimeError", "message": f"size {i} does not match {i + 1}"},
        }
        for i in range(5)
    ]
    rows += [
        {
            "case": "d0",
            "mode": "eager",
            "status": "crash",
            "stage": "run",
            "error": {"type": "Crash", "message": "worker died: signal 11"},
        },
        {"case": "e0", "mode": "eager", "status": "pass"},
        {
            "case": "s0",
            "mode": "eager",
            "status": "skip",
            "error": {"type": "Skip", "message": "needs 80 GB"},
        },
    ]
    store.add_results("r1", rows)
    assert store.headline("r1").get("r1", {}).get("statuses", {}) == {
        "eager_fail": 5,
        "crash": 1,
        "pass": 1,
        "skip": 1,
    }
    common = store.failures("r1", examples=2)
    assert [(g["status"], g["count"]) for g in common] == [("eager_fail", 5), ("crash", 1)]
    assert common[0]["signature"] == "RuntimeError: size N does not match N"
    assert common[0]["examples"] == [
        {"case": "c0", "mode": "eager"},
        {"case": "c1", "mode": "eager"},
    ]
    assert common[0]["message"] == "size 0 does not match 1"
    assert [g["status"] for g in store.failures("r1", worst_first=True)] == [
        "crash",
        "eager_fail",
    ]
    assert store.failures("r1", count=True) == 2


def test_a_group_with_no_stage_or_no_signature_names_its_examples(store):
    """A group's examples are found by equalities, or IS NULL where the group has no stage
    or no error (queries.failure_examples)."""
    rows = [{"case": f"n{i}", "mode": "eager", "status": "crash", "stage": "run"} for i in range(2)]
    rows += [
        {
            "case": f"s{i}",
            "mode": "compile",
            "status": "oom",
            "error": {"type": "OutOfMemoryError", "message": f"tried {i} MiB"},
        }
        for i in range(3)
    ]
    store.add_results("r1", rows)
    groups = {g["status"]: g for g in store.failures("r1", examples=2)}
    assert groups["crash"]["stage"] == "run" and groups["crash"]["signature"] is None
    assert groups["crash"]["examples"] == [
        {"case": "n0", "mode": "eager"},
        {"case": "n1", "mode": "eager"},
    ]
    assert groups["oom"]["stage"] is None
    assert groups["oom"]["signature"] == "OutOfMemoryError: tried N MiB"
    assert [e["case"] for e in groups["oom"]["examples"]] == ["s0", "s1"]
    assert groups["oom"]["message"] == "tried 0 MiB"


def test_results_that_ran_an_op_on_the_host_page_and_count_by_run(store):
    """Every overload of an op (a prefix with its dot), not an op whose name merely starts
    the same nor one that ran on the device; pages in recorded order without overlap; counts
    per run (PostgreSQL: the prefix operator, a page's ids first)."""
    _run(store, "r2")

    def row(case: str, *ops: str, fallback: bool = True) -> dict:
        table = [{"op": op, "device": "cpu", "count": 1, "fallback": fallback} for op in ops]
        return {"case": case, "mode": "eager", "status": "pass", "findings": {"ops": table}}

    store.add_results(
        "r1",
        [row(f"a{i}", "aten.cumsum.default", "aten.cumsum.out") for i in range(5)]
        + [row("b", "aten.cumsum_x.default"), row("c", "aten.cumsum")]
        + [row("d", "aten._index_put_impl_.default")]
        + [row("f", "aten.cumsum.default", fallback=False)],
    )
    store.add_results("r2", [row("a0", "aten.cumsum.out"), row("e")])
    assert store.results(fallback_op="aten.cumsum", by_run=True) == {"r1": 6, "r2": 1}
    assert store.results(fallback_op="aten::cumsum", count=True) == 7
    pages = [
        [
            (r["run_id"], r["case"])
            for r in store.results(fallback_op="aten.cumsum", limit=3, offset=o)
        ]
        for o in range(0, 9, 3)
    ]
    assert pages == [
        [("r1", "a0"), ("r1", "a1"), ("r1", "a2")],
        [("r1", "a3"), ("r1", "a4"), ("r1", "c")],
        [("r2", "a0")],
    ]
    assert [r["case"] for r in store.results(run_id="r2", limit=1, offset=1)] == ["e"]
    assert [r["case"] for r in store.results(run_id="r1", offset=7)] == ["d", "f"]
    assert store.results(fallback_op="aten._index_put_impl_", by_run=True) == {"r1": 1}
    # Runs recorded at the same time (their id spans overlap): counted by the result rows.
    store.add_results("r1", [row("g", "aten.cumsum.default")])
    store.add_results("r2", [row("h", "aten.sort.default")])
    assert store.results(fallback_op="aten.cumsum", by_run=True) == {"r1": 7, "r2": 1}
    assert store.results(fallback_op="aten.sort", by_run=True) == {"r2": 1}
    assert store.results(fallback_op="aten.cumsum", status="pass", by_run=True) == {
        "r1": 7,
        "r2": 1,
    }


def test_notes_on_runs_and_cases_are_searchable(store):
    store.add_results("r1", [{"case": "hf/llama", "mode": "eager", "status": "pass"}])
    store.add_note("r1", "accepted: the fallback of cumsum costs 2%", author="ana")
    store.add_note("r1", "parity drift explained by tf32", case="hf/llama", mode="eager")
    with pytest.raises(StoreError, match="no result for case 'hf/gpt2'"):
        store.add_note("r1", "x", case="hf/gpt2")
    with pytest.raises(StoreError, match="not 'compile'"):
        store.add_note("r1", "x", case="hf/llama", mode="compile")
    with pytest.raises(StoreError, match="no run 'r9'"):
        store.add_note("r9", "x")
    with pytest.raises(StoreError, match="needs text"):
        store.add_note("r1", "  ")
    assert [n["text"] for n in store.notes(run_id="r1", case="hf/llama")] == [
        "parity drift explained by tf32"
    ]
    assert [n["author"] for n in store.search("cumsum", notes=True)] == ["ana"]
    assert store.search("tf3", notes=True) == []  # whole words ...
    assert [n["case"] for n in store.search("tf3*", notes=True)] == ["hf/llama"]  # ... or a prefix
    assert store.search('"NEAR(', notes=True) == []


def test_search_ranks_the_newest_matches_and_pages_without_overlap(store, monkeypatch):
    from torchport.kb.reads import search as search_read

    monkeypatch.setattr(search_read, "RANK_WINDOW", 4)
    store.add_results(
        "r1",
        [
            {
                "case": "c0",
                "mode": "eager",
                "status": "eager_fail",
                "stage": "run",
                "error": {"type": "E", "message": "cumsum fell back"},
            },
            {"case": "hf/cumsum", "mode": "eager", "status": "pass"},  # a case-id hit, oldest
            *(
                {
                    "case": f"c{i}",
                    "mode": "eager",
                    "status": "eager_fail",
                    "stage": "run",
                    "error": {"type": "E", "message": "the op fell back", "traceback": "in cumsum"},
                }
                for i in range(2, 8)
            ),
        ],
    )
    assert store.search("cumsum", count=True) == 8
    # The newest four matches are ranked (a message hit above traceback hits, then newest);
    # older ones follow newest first: the case-id hit is too old to be ranked.
    order = [r["case"] for r in store.search("cumsum")]
    assert order == ["c7", "c6", "c5", "c4", "c3", "c2", "hf/cumsum", "c0"]
    pages = [r["case"] for o in range(0, 8, 3) for r in store.search("cumsum", limit=3, offset=o)]
    assert pages == order
    monkeypatch.setattr(search_read, "RANK_WINDOW", 100)
    assert [r["case"] for r in store.search("cumsum", limit=2)] == ["hf/cumsum", "c0"]
    assert store.search("cums") == [] and len(store.search("cums*")) == 8
    assert store.search('"NEAR( OR') == []


def test_find_runs_by_device_suite_and_labels(store):
    store.update_run("r1", state="complete")
    _run(store, "r2", device="cuda", labels={"release": "2.14"})
    store.update_run("r2", state="complete")
    _run(store, "r3", device="cuda", labels={"release": "2.14"})  # still running
    store.update_run("r3", state="interrupted")
    assert [r["id"] for r in store.runs(device="cuda", complete=True)] == ["r2"]
    assert [r["id"] for r in store.runs(labels={"release": "2.14"}, complete=False)] == ["r3", "r2"]
    assert [r["id"] for r in store.runs(labels={"release": "2.13"}, complete=True)] == []


def _plan(store, sql, args=()):
    conn = store._conn()
    return " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args))


def test_reads_use_indexes_not_a_scan_of_every_result(sqlite_store):
    store = sqlite_store
    from torchport.kb import queries as q

    flags = dict(run_id=False, status=False, case_glob=True, fallback_op=False)
    plan = _plan(store, q.select_results(**flags, paged=True), ("hf/llama-1*", 10, 0))
    assert "USING INDEX results_case_mode" in plan and "SCAN results" not in plan, plan
    plan = _plan(
        store,
        q.select_results(**dict(flags, case_glob=False, run_id=True), paged=True),
        ("r1", 10, 0),
    )
    assert "USING INDEX results_run" in plan, plan
    by_case = q.select_results(
        **dict(flags, case_glob=False, run_id=True), order="case", with_ops=True
    )
    for sql in (q.outcomes(), by_case):
        plan = _plan(store, sql, ("r1",))  # two runs walked side by side, never sorted
        assert "USING INDEX" in plan and "(run_id=?)" in plan and "TEMP B-TREE" not in plan, plan
    for sql in (  # a baseline, a gate, the headline's medians: never a result row
        q.statuses(),
        q.headline_compile_wait(),
        q.headline_speedup(),
    ):
        plan = _plan(store, sql, ("r1",))
        assert "COVERING INDEX results_outcomes" in plan and "SCAN results" not in plan, plan
    plan = _plan(store, q.statuses(), ("r1",))
    assert "TEMP B-TREE" not in plan, plan
    for sql in (q.LAST_EAGER_STATUS, q.LAST_ANY_STATUS):
        plan = _plan(store, sql, ("a", None, None))
        assert "results_case_mode" in plan and "SCAN r" not in plan, plan
    # A run's counts and failure groups from its tallies (run_tallies), never its results.
    plan = _plan(store, q.RUN_STATUS_COUNTS, ("r1",))
    assert "INDEX run_tallies_key" in plan and "results" not in plan, plan
    plan = _plan(store, q.failure_groups(severity=()), ("r1", 10))
    assert "INDEX run_tallies_key" in plan and "results" not in plan, plan
    params = {
        "run_a": "r1",
        "run_b": "r2",
        "parity": 10,
        "compile": 1.15,
        "memory": 1.1,
        "min_samples": 5,
        "min_change": 0.02,
        "limit": 30,
        "low": "a",
        "high": "z",
    }
    for sql in (
        q.pairs_that_may_differ(),
        q.pair_counts(),
        q.compare_lists(),
        q.pair_counts(bounds=(True, True)),  # a part of the pairs
        q.compare_lists(bounds=(True, False)),
    ):
        plan = _plan(store, sql, params)  # A walked on an index, B found by one
        assert "SEARCH a USING" in plan and "SCAN a" not in plan and "SCAN b" not in plan, plan
        assert "(run_id=? AND case_id=? AND mode=?)" in plan, plan
    for sql in (q.pair_counts(), q.compare_lists()):
        plan = _plan(store, sql, params)  # every pair decided from the index alone
        assert plan.count("COVERING INDEX results_outcomes") >= 2, plan
    plan = _plan(store, q.results_by_id(3), (1, 2, 3))
    assert "SEARCH results USING INTEGER PRIMARY KEY" in plan, plan
    for sql, args in ((q.SEARCH_WINDOW, ('"x"', 1000)), (q.SEARCH_BY_RECENCY, ('"x"', 50, 0))):
        plan = _plan(store, sql, args)  # the FTS index in rowid order: stops at the page
        assert "VIRTUAL TABLE INDEX" in plan and "B-TREE" not in plan, plan


def test_outcomes_carry_the_key_figures(store):
    metrics = {
        "perf_median_ms": 2.5,
        "perf_p10_ms": 2.0,
        "perf_p90_ms": 3.0,
        "perf_samples": 31,
        "perf_peak_bytes": 1024,
        "parity_cosine": 1.0,
    }
    store.add_results(
        "r1",
        [
            {
                "case": "a",
                "mode": "eager",
                "metrics": metrics,
                "grade": "fallback",
                "findings": {"fallback_ops": {"aten.cumsum.default": 2}},
            }
        ],
    )
    store.add_results(
        "r1",
        [
            {
                "case": "b",
                "mode": "eager",
                "status": "eager_fail",
                "stage": "run",
                "grade": "on_device",
                "findings": {"fallback_ops": {}},
                "error": {"type": "E", "message": "first line\nsecond"},
            }
        ],
    )
    a, b = store.statuses("r1", outcomes=True)
    expected = {k: v for k, v in metrics.items() if k != "parity_cosine"}
    assert a["figures"] == expected and type(a["figures"]["perf_samples"]) is int
    assert a["host_ops"] == {"aten.cumsum.default": 2} and b["host_ops"] is None
    assert b["error_line"] == "first line" and b["figures"] == {}


def test_the_upgrade_fills_the_new_columns_as_an_insert_does(tmp_path):
    import json as json_

    from tests.store.test_store import _v1_file

    old = str(tmp_path / "v1.db")
    _v1_file(old)
    findings = json_.dumps(
        {"fallback_ops": {"aten.sort.default": 1, "aten.cumsum.default": 2}}, sort_keys=True
    )
    conn = sqlite3.connect(old)
    conn.execute(
        "UPDATE results SET grade = 'fallback', findings = ?, error_type = 'E',"
        " error_message = 'size 3 != 4', metrics = '{\"perf_median_ms\": 2.5}'",
        (findings,),
    )
    conn.commit()
    conn.close()
    with open_store(old, write=True) as store:  # migrates v1 -> v3
        store.add_results(
            "old",
            [
                {
                    "case": "b",
                    "mode": "eager",
                    "grade": "fallback",
                    "metrics": {"perf_median_ms": 2.5},
                    "findings": json_.loads(findings),
                    "error": {"type": "E", "message": "size 3 != 4"},
                }
            ],
        )
        rows = (
            store._conn()
            .execute("SELECT host_ops, signature, perf_median_ms FROM results ORDER BY id")
            .fetchall()
        )
    assert [tuple(r) for r in rows][0] == tuple(rows[1])
    assert rows[0]["signature"] == "E: size N != N"


def test_a_v3_file_is_compared_after_its_migration_as_a_current_one(tmp_path):
    """Schema v3 had the key figures but not the host-op column: refused by reads, then
    migrated (``torchport migrate``), it compares with the same answer."""
    from tests import kb, old_kb
    from torchport.kb.base import OlderSchema
    from torchport.kb.store import migrate
    from torchport.views.compare import compare_runs

    path = kb.build(tmp_path / "kb.db")
    results = kb.results()
    results[1]["findings"] = dict(results[1]["findings"], fallback_ops={"aten.sort.default": 1})
    kb.build(path, run_id="r2", results_=results)
    with open_store(path, write=False) as store:
        latest = compare_runs(store, "r1", "r2").to_dict()
    assert latest["host_ops"]
    old = old_kb.sqlite_at(str(tmp_path / "v3.db"), 3, path)
    with pytest.raises(OlderSchema):
        open_store(old, write=False)
    assert migrate(old).before == 3
    with open_store(old, write=False) as store:
        assert compare_runs(store, "r1", "r2").to_dict() == latest
        paged = compare_runs(store, "r1", "r2", limit=30).to_dict()
        assert dict(paged, totals={}) == latest
