"""``migrate``: a knowledge base of every older schema, built by the older migrations (tests/
old_kb.py), is refused by reads (one line naming the command, nothing changed) and brought to
the current schema with the same answers as a base written at it, on both engines; a current
base is left as it is, a newer one refused; a user who may not change the base is told so in
one line. Writers migrate the base they open (docs/where-rules-live.md)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import re
import shlex
import threading
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import kb, old_kb, pg
from torchport.kb import StoreError, open_store
from torchport.kb.base import OlderSchema
from torchport.kb.pg_schema import FIRST_VERSION
from torchport.kb.schema import SCHEMA_VERSION, migrate_command
from torchport.kb.sql_common import redact_url
from torchport.kb.store import Migration, migrate
from torchport.views.compare import compare_runs


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    """A current-schema base whose rows the older bases are made of: two runs that differ
    (a failure, a host op, a step time), a note and artifacts."""
    path = str(tmp_path_factory.mktemp("source") / "kb.db")
    kb.build(path)
    results = kb.results()
    results[1]["findings"] = dict(results[1]["findings"], fallback_ops={"aten.sort.default": 1})
    results[0]["status"], results[0]["stage"] = "eager_fail", "run"
    results[0]["error"] = {"type": "RuntimeError", "message": "size 3 != 4\nmore", "traceback": ""}
    kb.build(path, run_id="r2", results_=results)
    with open_store(path, write=True) as store:
        store.add_note("r2", "accepted: the sort runs on the host", case="hf/llama", author="me")
        store._put_artifacts("r1", [{"path": "trace.json", "sha256": "ab", "bytes": 3}])
    return path


def _reads(store) -> dict:
    """What the read commands show, through the store and the views."""
    return {
        "runs": [dict(run, started_at=None) for run in store.runs()],
        "run": store.get_run("r2"),
        "results": store.results(),
        "outcomes": list(store.statuses("r2", outcomes=True)),
        "statuses": list(store._statuses_rows("r2")),
        "headline": store.headline(),
        "figures": store.headline("r1", figures=True),
        "failures": store.failures("r2", worst_first=True),
        "failure_count": store.failures("r2", count=True),
        "count": store.results(run_id="r2", count=True),
        "by_run": store.results(fallback_op="aten.sort", by_run=True),
        "search": [r["case"] for r in store.search("llama")],
        "notes": store.notes(run_id="r2"),
        "note_search": store.search("host", notes=True),
        "artifacts": store._artifacts("r1"),
        "compare": compare_runs(store, "r1", "r2").to_dict(),
        "compare_page": compare_runs(store, "r1", "r2", limit=2).to_dict(),
    }


def _held(reads: dict, version: int) -> dict:
    """``reads`` less what a base of schema ``version`` never held: a run's heartbeat (v5),
    probe versions (v2), notes and artifacts (v3)."""
    if version < 5:
        for run in (*reads["runs"], reads["run"]):
            run["heartbeat_at"] = None
    if version < 2:
        for result in reads["results"]:
            result["probe_versions"] = {}
    if version < 3:
        reads["notes"] = reads["note_search"] = reads["artifacts"] = []
        for name in ("compare", "compare_page"):
            reads[name]["notes"] = []
    return reads


def _refused_then_migrated(url: str, where: str, version: int, expected: dict) -> None:
    with pytest.raises(OlderSchema) as refused:
        open_store(url, write=False)
    line = str(refused.value)
    assert "\n" not in line and f"schema v{version}, older" in line
    assert f"'{migrate_command(where)}'" in line
    assert migrate(url) == Migration(where, version, SCHEMA_VERSION)
    with open_store(url, write=False) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert _reads(store) == _held(expected, version)
    assert migrate(url) == Migration(where, SCHEMA_VERSION, SCHEMA_VERSION)  # nothing to do


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_every_older_sqlite_file_is_refused_by_reads_and_migrated_to_the_same_answers(
    source, tmp_path, version
):
    with open_store(source, write=False) as store:
        expected = _reads(store)
    path = old_kb.sqlite_at(str(tmp_path / f"v{version}.db"), version, source)
    before = _digest(path)
    with pytest.raises(OlderSchema):
        open_store(path, write=False)
    # Nothing changed (a WAL file's reader may leave an empty -wal beside it, as for any read).
    wal = f"{path}-wal"
    assert _digest(path) == before and (not os.path.exists(wal) or os.path.getsize(wal) == 0)
    _refused_then_migrated(path, path, version, expected)


@pytest.mark.parametrize("version", range(FIRST_VERSION, SCHEMA_VERSION))
def test_every_older_postgresql_database_is_refused_by_reads_and_migrated_to_the_same_answers(
    source, pg_url, version
):
    with open_store(source, write=False) as store:
        expected = _reads(store)
    old_kb.pg_at(pg_url, version, source)
    _refused_then_migrated(pg_url, redact_url(pg_url), version, expected)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_migrates_started_together_migrate_once_and_say_so_once(source, tmp_path, engine, request):
    """Four at once on one older base: the first under the write lock migrates it, the others
    find it current (each says what it found there, not what its read saw before)."""
    if engine == "sqlite":
        url = old_kb.sqlite_at(str(tmp_path / "v5.db"), 5, source)
    else:
        url = old_kb.pg_at(request.getfixturevalue("pg_url"), 5, source)
    start = threading.Barrier(4)

    def one() -> int:
        start.wait()
        return migrate(url).before

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        found = sorted(pool.map(lambda _: one(), range(4)))
    assert found == [5] + [SCHEMA_VERSION] * 3, found


def test_a_current_base_is_left_as_it_is(source, tmp_path):
    path = str(tmp_path / "kb.db")
    kb.build(path)
    before = _digest(path)
    assert migrate(path) == Migration(path, SCHEMA_VERSION, SCHEMA_VERSION)
    assert _digest(path) == before


def test_a_newer_schema_and_a_missing_base_are_refused(tmp_path):
    import sqlite3

    path = kb.build(tmp_path / "kb.db")
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = _digest(path)
    with pytest.raises(StoreError, match="newer than this torchport's"):
        migrate(path)
    assert _digest(path) == before
    missing = str(tmp_path / "none.db")
    with pytest.raises(StoreError, match="no knowledge base at"):
        migrate(missing)
    assert not os.path.exists(missing)


def test_a_read_only_file_is_refused_by_reads_and_by_migrate_with_one_line(source, tmp_path):
    path = old_kb.sqlite_at(str(tmp_path / "v6.db"), 6, source)
    os.chmod(path, 0o444)
    before = _digest(path)
    with pytest.raises(OlderSchema, match=re.escape(migrate_command(path))):
        open_store(path, write=False)
    with pytest.raises(StoreError) as refused:
        migrate(path)
    line = str(refused.value)
    assert "\n" not in line and "may not change it" in line
    assert f"run '{migrate_command(path)}' as a user who can" in line
    assert _digest(path) == before


def test_a_write_migrates_the_base_it_opens(source, tmp_path):
    """The decision (docs/where-rules-live.md): a run, a note or an import writes the current
    schema, so it migrates an older base as it opens it; reads never do."""
    path = old_kb.sqlite_at(str(tmp_path / "v4.db"), 4, source)
    with open_store(path, write=True) as store:
        assert store.schema_version() == SCHEMA_VERSION
        store.add_note("r1", "after the upgrade")
    with open_store(path, write=False) as store:
        assert [n["text"] for n in store.notes(run_id="r1")] == ["after the upgrade"]


def test_a_postgresql_role_without_the_rights_is_refused_with_one_line(source, pg_server, pg_url):
    old_kb.pg_at(pg_url, 6, source)
    name = pg_url.split("?")[0].rsplit("/", 1)[1]
    role, password = f"tp_reader_{uuid.uuid4().hex[:8]}", "reader-pw"
    with pg.admin(pg_server) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    try:
        with pg.admin(pg_url) as conn:
            conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        url = pg.tcp_url(pg_server, user=role, password=password, database=name)
        where = redact_url(url)
        with pytest.raises(OlderSchema) as refused:  # the same line as any reader's
            open_store(url, write=False)
        assert f"'{migrate_command(where)}'" in str(refused.value)
        with pytest.raises(StoreError) as denied:
            migrate(url)
        line = str(denied.value)
        assert "\n" not in line and "may not change it" in line and password not in line
        assert f"run '{migrate_command(where)}' as a user who can" in line
        with pg.admin(pg_url) as conn:  # nothing changed
            assert conn.execute("SELECT version FROM torchport_schema").fetchone()[0] == 6
    finally:
        with pg.admin(pg_url) as conn:
            conn.execute(f"DROP OWNED BY {role}")
        with pg.admin(pg_server) as conn:
            conn.execute(f"DROP ROLE {role}")


@given(st.text(min_size=1).filter(lambda t: "\x00" not in t))
def test_the_command_named_is_the_one_to_paste_whatever_the_path(where):
    """A path or URL with spaces, quotes, ``;`` or ``$(...)`` in it: the command the refusal
    names is split by a shell back into the same path, nothing run."""
    assert shlex.split(migrate_command(where)) == ["torchport", "migrate", "--db", where]
