"""A run's counts kept as its results are recorded (schema v8, migrations/0008: run_tallies):
status counts, failure groups and the headline's grades and host ops read from them equal the
same reads over every result row, on each engine; an older file gains them by its upgrade."""

import sqlite3

from tests import kb
from tests.synthetic_kb import case_ids, result
from torchport.records import open_store
from torchport.records.queries import TALLIES_FROM


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


def test_tallies_answer_as_the_result_rows_do(kb_url):
    _fill(kb_url)
    with open_store(kb_url, write=False) as store:
        assert store.schema_version() >= TALLIES_FROM
        tallied = _reads(store)
        store._version = TALLIES_FROM - 1  # the same store, read as a v7 file: every row
        counted = _reads(store)
    assert tallied == counted
    assert tallied["s1"]["groups"] and tallied["s1"]["headline"]["s1"]["host_ops"]
    assert sum(tallied["s0"]["statuses"].values()) == 300


def test_an_older_file_gains_its_tallies_by_the_upgrade(tmp_path):
    path = str(tmp_path / "kb.db")
    _fill(path)
    with open_store(path, write=False) as store:
        expected = _reads(store)
    conn = sqlite3.connect(path)  # back to schema v7: no tallies
    conn.execute("DROP TRIGGER results_tally")
    conn.execute("DROP TABLE run_tallies")
    conn.execute("ALTER TABLE results DROP COLUMN host_ops_key")
    conn.execute(f"PRAGMA user_version = {TALLIES_FROM - 1}")
    conn.commit()
    conn.close()
    with open_store(path, write=False) as store:  # read as it is: from the rows
        assert store.schema_version() == TALLIES_FROM - 1 and _reads(store) == expected
    with open_store(path, write=True) as store:  # the upgrade counts what is there
        store.add_results("s0", [{"case": "new", "mode": "eager", "status": "crash"}])
    with open_store(path, write=False) as store:
        assert store.schema_version() >= TALLIES_FROM
        got = _reads(store)
        assert (
            store.headline("s0").get("s0", {}).get("statuses", {})["crash"]
            == expected["s0"]["statuses"].get("crash", 0) + 1
        )
        store._version = TALLIES_FROM - 1
        assert got == _reads(store)
