"""A run's counts kept as its results are recorded (schema v8, migrations/0008: run_tallies):
status counts, failure groups and the headline's grades and host ops read from them equal the
same counts made from every result row, on each engine; an older file gains them by its
upgrade (``torchport migrate``)."""

from collections import Counter

from tests import kb, old_kb
from tests.synthetic_kb import case_ids, result
from torchport.kb import open_store
from torchport.kb.store import migrate


def _reads(store) -> dict:
    runs = {r["id"]: r["counts"] for r in store.runs()}
    out: dict = {"runs": runs, "headline": store.headline()}
    for run in runs:
        out[run] = {
            "statuses": store.headline(run).get(run, {}).get("statuses", {}),
            "groups": store.failures(run, limit=50),
            "worst": store.failures(run, worst_first=True, limit=50),
            "group_count": store.failures(run, count=True),
            "headline": store.headline(run),
        }
    return out


def _fill(url: str) -> None:
    """Two runs of varied synthetic results (failures with signatures, host-op tables)."""
    kb.build(url)
    cases = case_ids(150)
    with open_store(url, write=True) as store:
        for r, device in enumerate(("cpu", "cuda")):
            rows = [result(c, m, r, device) for c in cases for m in ("eager", "compile")]
            kb.add_run(store, f"s{r}", rows, plan=[], suite="hf", device=device)


def _from_rows(store, run: str) -> dict:
    """The oracle: the same counts made in Python from every result row of ``run``."""
    from torchport.records.signature import error_signature
    from torchport.records.status import HEADLINE_GRADES, NOT_FAILURES

    rows = store.results(run_id=run)
    groups: Counter = Counter()
    for r in rows:
        if r["status"] not in NOT_FAILURES:
            error = r["error"] or {}
            sig = error_signature(error.get("type"), error.get("message")) if error else None
            groups[(r["status"], r["stage"], sig)] += 1
    host_ops: Counter = Counter()
    for r in rows:
        if r["grade"] in HEADLINE_GRADES:
            for op in (r["findings"] or {}).get("fallback_ops") or {}:
                host_ops[op] += 1
    return {
        "statuses": dict(Counter(r["status"] for r in rows)),
        "groups": dict(groups),
        "grades": dict(Counter(r["grade"] for r in rows if r["grade"] is not None)),
        "host_op_results": dict(host_ops),
    }


def _tallied(reads: dict, run: str) -> dict:
    mine = reads[run]
    return {
        "statuses": mine["statuses"],
        "groups": {(g["status"], g["stage"], g["signature"]): g["count"] for g in mine["groups"]},
        "grades": mine["headline"][run]["grades"],
        "host_op_results": mine["headline"][run]["host_op_results"],
    }


def test_tallies_answer_as_the_result_rows_do(kb_url):
    _fill(kb_url)
    with open_store(kb_url, write=False) as store:
        tallied = _reads(store)
        for run in tallied["runs"]:
            assert _tallied(tallied, run) == _from_rows(store, run), run
            assert tallied[run]["group_count"] == len(tallied[run]["groups"])
    assert tallied["s1"]["groups"] and tallied["s1"]["headline"]["s1"]["host_ops"]
    assert sum(tallied["s0"]["statuses"].values()) == 300


def test_an_older_file_gains_its_tallies_by_the_upgrade(tmp_path):
    source = str(tmp_path / "kb.db")
    _fill(source)
    with open_store(source, write=False) as store:
        expected = _reads(store)
    path = old_kb.sqlite_at(str(tmp_path / "v7.db"), 7, source)  # no tallies yet
    assert migrate(path).before == 7
    with open_store(path, write=False) as store:  # the upgrade counted what is there
        assert _reads(store) == expected
    with open_store(path, write=True) as store:
        store.add_results("s0", [{"case": "new", "mode": "eager", "status": "crash"}])
    with open_store(path, write=False) as store:
        counts = store.headline("s0")["s0"]["statuses"]
        assert counts["crash"] == expected["s0"]["statuses"].get("crash", 0) + 1
        assert _tallied(_reads(store), "s0") == _from_rows(store, "s0")
