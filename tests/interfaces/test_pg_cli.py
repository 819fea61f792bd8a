"""The installed ``torchport`` against a PostgreSQL server, as a team uses it: a real smoke run
recorded over TCP with a password (which is never printed or stored), read back with runs,
show, search and results; a laptop's SQLite file imported, then compare, baseline and gate;
export to a file; --resume of an interrupted run and of another host's run (live while its
heartbeat is fresh); connection problems as one line, exit 2."""

import json
from datetime import datetime, timedelta, timezone

import pytest

from tests import kb, pg
from tests.conftest import torchport
from tests.interfaces.test_kb_cli import _second_run_results
from torchport.kb import open_store
from torchport.kb.sql_common import STALE_AFTER_S

PASSWORD = "team-s3cret"


@pytest.fixture
def team_url(pg_server, pg_url):
    """The test's database, owned by a role that logs in over TCP with a password."""
    name = pg_url.split("?")[0].rsplit("/", 1)[1]
    with pg.admin(pg_server) as conn:
        conn.execute("DROP ROLE IF EXISTS team")
        conn.execute(f"CREATE ROLE team LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f'ALTER DATABASE "{name}" OWNER TO team')
    yield pg.tcp_url(pg_server, user="team", password=PASSWORD, database=name)
    pg.drop_database(pg_server, name)
    with pg.admin(pg_server) as conn:
        conn.execute("DROP ROLE team")


def _ok(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert PASSWORD not in proc.stdout + proc.stderr
    return proc.stdout


def _set_run(url, run_id, **columns):
    with pg.admin(url) as conn:
        sets = ", ".join(f"{name} = %s" for name in columns)
        conn.execute(f"UPDATE runs SET {sets} WHERE id = %s", (*columns.values(), run_id))


def _smoke_run(url, tmp_path, *modes) -> dict:
    proc = torchport(
        "run", "--suite", "smoke", "--cases", "mlp", "--device", "cpu", "--probes", "none",
        "--modes", ",".join(modes), "--db", url, "--json", cwd=tmp_path,
    )  # fmt: skip
    return json.loads(_ok(proc))


def test_a_smoke_run_recorded_read_back_and_another_hosts_run_resumed(team_url, tmp_path):
    run = _smoke_run(team_url, tmp_path, "eager")
    run_id = run["run_id"]
    assert run["state"] == "complete" and len(run["results"]) == 1
    assert run_id in _ok(torchport("runs", "--db", team_url))
    assert "smoke/mlp" in _ok(torchport("show", run_id, "--db", team_url))
    assert "smoke/mlp" in _ok(torchport("search", "mlp", "--db", team_url))
    with open_store(team_url, write=False) as store:
        recorded = store.get_run(run_id)
    assert PASSWORD not in json.dumps(recorded) and "team@127.0.0.1" in recorded["command"]
    # Another host's run: refused while its heartbeat is fresh, resumable once it is stale.
    now = datetime.now(timezone.utc)
    for age_s, code in ((5, 2), (STALE_AFTER_S + 60, 0)):
        beat = (now - timedelta(seconds=age_s)).isoformat(timespec="seconds")
        _set_run(team_url, run_id, state="running", host="lab-host-7", pid=4242, heartbeat_at=beat)
        proc = torchport("run", "--resume", run_id, "--db", team_url, cwd=tmp_path)
        assert proc.returncode == code, proc.stderr[-2000:]
        if code:
            assert "still going" in proc.stderr and "lab-host-7" in proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1
    with open_store(team_url, write=False) as store:
        assert store.get_run(run_id)["state"] == "complete"


@pytest.mark.slow
def test_resume_of_an_interrupted_run_records_only_what_is_missing(team_url, tmp_path):
    run = _smoke_run(team_url, tmp_path, "eager", "compile")
    run_id = run["run_id"]
    with pg.admin(team_url) as conn:
        conn.execute("DELETE FROM results WHERE run_id = %s AND mode = 'compile'", (run_id,))
    _set_run(team_url, run_id, state="interrupted")
    resumed = json.loads(
        _ok(torchport("run", "--resume", run_id, "--db", team_url, "--json", cwd=tmp_path))
    )
    assert resumed["state"] == "complete"
    finished = {r["mode"]: r["finished_at"] for r in resumed["results"]}
    before = {r["mode"]: r["finished_at"] for r in run["results"]}
    assert set(finished) == {"eager", "compile"} and finished["eager"] == before["eager"]


def test_a_laptops_file_imported_then_compared_gated_and_exported(team_url, tmp_path):
    laptop = kb.build(tmp_path / "laptop.db", labels={"release": "a"})
    kb.build(laptop, run_id="r2", labels={"release": "b"}, results_=_second_run_results())
    out = _ok(torchport("import", laptop, "--db", team_url))
    assert "2 runs added" in out
    assert "already present" in _ok(torchport("import", laptop, "--db", team_url))
    compare = json.loads(_ok(torchport("compare", "r1", "r2", "--db", team_url, "--json")))
    assert [(c["case"], c["mode"]) for c in compare["newly_failing"]] == [("hf/gpt2", "eager")]
    expected = tmp_path / "expected.json"
    _ok(torchport("baseline", "save", "r1", "-o", expected, "--db", team_url))
    gate = torchport("gate", "r2", "--baseline", expected, "--db", team_url)
    assert gate.returncode == 1 and "hf/gpt2" in gate.stdout, gate.stderr
    assert torchport("gate", "r1", "--baseline", expected, "--db", team_url).returncode == 0
    _ok(torchport("note", "r2", "gpt2 crash is the driver", "--db", team_url))
    assert "driver" in _ok(torchport("search", "driver", "--db", team_url))
    exported = tmp_path / "team.jsonl"
    _ok(torchport("export", "r1", "r2", "-o", exported, "--db", team_url))
    back = tmp_path / "back.db"
    assert "2 runs added" in _ok(torchport("import", exported, "--db", back))
    with open_store(str(back), write=False) as store:
        assert len(store.notes(run_id="r2")) == 1 and store.results(count=True) == 16


def test_connection_problems_are_one_line_exit_2_without_the_password(team_url, pg_server):
    wrong = team_url.replace(PASSWORD, "not-the-pw")
    down = f"postgresql://team:{PASSWORD}@127.0.0.1:{pg.free_port()}/kb"
    missing = pg.with_database(pg_server, "no_such_kb")
    for url, needle in (
        (wrong, "password authentication failed"),
        (down, "cannot reach the PostgreSQL server"),
        (missing, 'database "no_such_kb" does not exist'),
    ):
        proc = torchport("runs", "--db", url)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr, proc.stderr
        assert PASSWORD not in proc.stderr and "not-the-pw" not in proc.stderr
