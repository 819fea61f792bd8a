"""PostgreSQL as a team's knowledge base: connection problems as one line with the fix (and no
password), the schema checks, and several processes writing to one server while one reads."""

import gc
import subprocess
import sys
import textwrap
import threading

import pytest

from tests import kb, pg
from torchport.kb import StoreError, open_store, pg_store
from torchport.kb.schema import SCHEMA_VERSION


def test_server_down_wrong_password_and_missing_database_each_say_what_to_do(pg_server, pg_url):
    with pg.admin(pg_url) as conn:
        conn.execute("CREATE ROLE alice LOGIN PASSWORD 'right-pw'")
    try:
        wrong = pg.tcp_url(pg_server, user="alice", password="s3cret-pw", database="postgres")
        with pytest.raises(StoreError) as refused:
            open_store(wrong, write=False)
        line = str(refused.value)
        assert (
            "password authentication failed" in line and "check the user and the password" in line
        )
        assert "s3cret-pw" not in line and "postgresql://alice@127.0.0.1" in line
        down = f"postgresql://alice:s3cret-pw@127.0.0.1:{pg.free_port()}/kb"
        with pytest.raises(StoreError, match="cannot reach the PostgreSQL server") as unreachable:
            open_store(down, write=True)
        assert "s3cret-pw" not in str(unreachable.value)
        with pytest.raises(StoreError, match='database "nope" does not exist.*createdb'):
            open_store(pg.with_database(pg_server, "nope"), write=True)
        for error in (refused, unreachable):
            assert "\n" not in str(error.value)
    finally:
        with pg.admin(pg_server) as conn:
            conn.execute("DROP OWNED BY alice CASCADE")
            conn.execute("DROP ROLE alice")


def test_a_database_that_is_not_a_knowledge_base_is_refused(pg_url):
    with pytest.raises(StoreError, match=r"not a torchport knowledge base \(empty\)"):
        open_store(pg_url, write=False)
    with pg.admin(pg_url) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    for write in (False, True):
        with pytest.raises(StoreError, match="another application's database"):
            open_store(pg_url, write=write)


def test_a_newer_schema_is_refused_and_a_read_only_store_writes_nothing(pg_url):
    kb.build(pg_url)
    with open_store(pg_url, write=False) as reader:
        assert reader.schema_version() == SCHEMA_VERSION
        with pytest.raises(StoreError, match="opened read-only"):
            reader.add_note("r1", "x")
        import psycopg

        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):  # the server refuses it too
            reader._conn().execute("DELETE FROM notes")
        # No JIT on a store's connections: it compiled a comparison for longer than it ran.
        assert reader._conn().execute("SHOW jit").fetchone()[0] == "off"
    with open_store(pg_url, write=True) as writer:
        assert writer._conn().execute("SHOW jit").fetchone()[0] == "off"
        # A comparison's statements join two runs without a hash join (merged from the index)
        settings = "SELECT current_setting('enable_hashjoin'), current_setting('enable_mergejoin')"
        assert tuple(writer._compare_rows(writer._conn(), settings, {})[0]) == ("off", "on")
        assert writer._conn().execute(settings).fetchone() == ("on", "on")  # for that one only
    with pg.admin(pg_url) as conn:
        conn.execute("UPDATE torchport_schema SET version = 99")
    for write in (False, True):
        with pytest.raises(
            StoreError, match=f"schema v99, newer than this torchport's v{SCHEMA_VERSION}"
        ):
            open_store(pg_url, write=write)


def test_a_read_apart_reuses_a_spare_connection_and_closes_an_unsound_one(pg_url):
    kb.build(pg_url)
    store = open_store(pg_url, write=False)
    first = store._borrow()
    assert first is not store._conn()
    store._lend_back(first)
    assert store._borrow() is first  # kept spare, lent again
    second = store._borrow()  # none spare: a new one
    assert second is not first
    with second.transaction():
        store._lend_back(second)  # inside a transaction: not fit to lend again, closed
    assert second.closed and second not in store._conns
    for _ in range(pg_store.SPARE_CONNECTIONS + 2):
        store._lend_back(store._connect())
    assert len(store._spare) == pg_store.SPARE_CONNECTIONS  # the others closed
    store._lend_back(first)
    spares = list(store._spare)
    store.close()
    assert all(conn.closed for conn in spares)
    with pytest.raises(StoreError, match="closed"):
        store._borrow()


def test_a_thread_s_connection_is_lent_back_when_the_thread_ends(pg_url):
    kb.build(pg_url)
    with open_store(pg_url, write=False) as store:
        used = []
        for _ in range(3):  # a server's worker threads, one after another
            worker = threading.Thread(target=lambda: used.append(store._conn()))
            worker.start()
            worker.join()
            del worker
            gc.collect()
        assert used[0] is used[1] is used[2] and not used[0].closed
        opened = len(store._conns)
    assert opened == 2 and used[0].closed  # the main thread's and the workers' one


def test_without_the_driver_a_postgresql_url_names_the_extra(tmp_path):
    blocker = tmp_path / "psycopg"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('no psycopg here')\n")
    code = (
        "from torchport.kb import StoreError, open_store\n"
        "try:\n    open_store('postgresql://u@h/db', write=False)\n"
        "except StoreError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert "install torchport[postgres]" in out.stdout, out.stderr


_WRITER = textwrap.dedent(
    """
    import sys
    from torchport.kb import open_store
    url, run_id = sys.argv[1], sys.argv[2]
    with open_store(url, write=True) as store:
        store.create_run(run_id=run_id, command="torchport run", suite="smoke", device="cpu",
                         config={}, plan=[], labels={"writer": run_id})
        env = store._put_environment({"torch": "2.13.0"})
        store._set_environment(run_id, env)
        for i in range(60):
            store.add_results(run_id, [{"case": f"c{i:02d}", "mode": "eager", "status": "pass",
                                      "error": {"type": "E", "message": f"shared words {i}"}}])
        store.add_note(run_id, f"written by {run_id}")
        store.update_run(run_id, state="complete")
    """
)
_READER = textwrap.dedent(
    """
    import sys, time
    from torchport.kb import open_store
    seen = []
    with open_store(sys.argv[1], write=False) as store:
        deadline = time.time() + 60
        while time.time() < deadline:
            runs = store.runs()
            seen.append(sum(sum(r["counts"].values()) for r in runs))
            if len(runs) == 2 and all(r["state"] == "complete" for r in runs):
                break
    assert seen == sorted(seen), seen  # committed results never disappear
    print(seen[-1], len(seen))
    """
)


def test_two_writer_processes_and_a_reader_share_one_server(pg_url):
    with open_store(pg_url, write=True):
        pass  # the schema exists before the reader opens it (writers migrate it too)
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, pg_url, run_id], stderr=subprocess.PIPE)
        for run_id in ("host-a", "host-b")
    ]
    reader = subprocess.run(
        [sys.executable, "-c", _READER, pg_url], capture_output=True, text=True, timeout=120
    )
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read()
    assert reader.returncode == 0, reader.stderr
    assert reader.stdout.split()[0] == "120"
    with open_store(pg_url, write=False) as store:
        assert {r["id"]: r["state"] for r in store.runs()} == {
            "host-a": "complete",
            "host-b": "complete",
        }
        assert store.results(count=True) == 120 and store.search("shared words", count=True) == 120
        assert len(store._environment(store.get_run("host-a")["environment_id"])) == 1
        assert sorted(n["text"] for n in store.notes()) == [
            "written by host-a",
            "written by host-b",
        ]
