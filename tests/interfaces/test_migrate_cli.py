"""``torchport migrate`` as a user runs it (the installed script, from a folder outside the
repository): every read command refuses a base of an older schema with one line that names the
command, exit 2, the file unchanged; ``migrate`` upgrades it, says so, and says so again when
there is nothing to do; afterwards the reads answer. On PostgreSQL too."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests import kb, old_kb
from tests.conftest import torchport
from torchport.kb.schema import SCHEMA_VERSION, migrate_command
from torchport.kb.sql_common import redact_url


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _one_line_exit_2(proc, needle: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]
    return lines[0]


def _reads(baseline: str, out: str) -> list[list[str]]:
    """Every command that reads the knowledge base, with what it needs."""
    return [
        ["runs"],
        ["show", "r1"],
        ["results", "--run", "r1"],
        ["search", "llama"],
        ["compare", "r1", "r2"],
        ["baseline", "save", "r1", "-o", f"{out}/b.json"],
        ["gate", "r2", "--baseline", baseline],
        ["export", "r1", "-o", f"{out}/r1.jsonl"],
        ["report", "r1", "-o", f"{out}/r1.html"],
        ["cases", "smoke"],
        ["serve", "--port", "0"],
    ]


@pytest.fixture
def source(tmp_path) -> tuple[str, str]:
    """A current base of two runs, and a baseline file saved from its run r1."""
    path = kb.build(tmp_path / "source.db")
    kb.build(path, run_id="r2")
    baseline = str(tmp_path / "baseline.json")
    proc = torchport("baseline", "save", "r1", "-o", baseline, "--db", path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return path, baseline


def _refused_migrated_read(db: str, where: str, version: int, baseline: str, out) -> None:
    command = migrate_command(where)
    for args in _reads(baseline, str(out)):
        line = _one_line_exit_2(torchport(*args, "--db", db), f"'{command}'")
        assert f"schema v{version}, older than this torchport's v{SCHEMA_VERSION}" in line
    assert not list(out.iterdir())  # no output written either
    proc = torchport("migrate", "--db", db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"{where}: migrated from schema v{version} to v{SCHEMA_VERSION}"
    again = torchport("migrate", "--db", db, "--json")
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout) == {"db": where, "from": SCHEMA_VERSION, "to": SCHEMA_VERSION}
    runs = torchport("runs", "--db", db, "--json")
    assert runs.returncode == 0 and {r["id"] for r in json.loads(runs.stdout)} == {"r1", "r2"}
    gate = torchport("gate", "r1", "--baseline", baseline, "--db", db)
    assert gate.returncode == 0, gate.stdout[-2000:] + gate.stderr[-2000:]


def test_an_older_sqlite_file_is_refused_by_every_read_then_migrated(source, tmp_path):
    path, baseline = source
    old = old_kb.sqlite_at(str(tmp_path / "old.db"), 4, path)
    before = _digest(old)
    out = tmp_path / "out"
    out.mkdir()
    for args in _reads(baseline, str(out))[:3]:
        torchport(*args, "--db", old)
    assert _digest(old) == before  # reads change nothing
    # An import reads its source: the same line, and no target is made.
    target = tmp_path / "team.db"
    line = _one_line_exit_2(torchport("import", old, "--db", target), f"'{migrate_command(old)}'")
    assert "schema v4, older" in line and not target.exists()
    _refused_migrated_read(old, old, 4, baseline, out)
    current = torchport("migrate", "--db", old)
    assert current.stdout.strip() == f"{old}: already at schema v{SCHEMA_VERSION}; nothing to do"


def test_migrate_refuses_a_newer_schema_and_a_missing_file_with_one_line(tmp_path):
    import sqlite3

    path = kb.build(tmp_path / "kb.db")
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = _digest(path)
    _one_line_exit_2(torchport("migrate", "--db", path), "newer than this torchport's")
    assert _digest(path) == before
    _one_line_exit_2(torchport("migrate", "--db", tmp_path / "none.db"), "no knowledge base at")
    assert not (tmp_path / "none.db").exists()


def test_an_older_postgresql_database_is_refused_by_every_read_then_migrated(
    source, pg_url, tmp_path
):
    path, baseline = source
    old_kb.pg_at(pg_url, 6, path)
    out = tmp_path / "out"
    out.mkdir()
    _refused_migrated_read(pg_url, redact_url(pg_url), 6, baseline, out)


def test_a_hostile_path_is_named_on_one_line_and_migrated(source, tmp_path):
    """A file name with a space, a quote, a newline and an escape: the refusal stays one line
    and the command it names, pasted, migrates that file."""
    path, _ = source
    old = old_kb.sqlite_at(str(tmp_path / "team 'kb'\n\x1b[2J.db"), 7, path)
    line = _one_line_exit_2(torchport("runs", "--db", old), "torchport migrate --db")
    assert "\x1b" not in line and "schema v7, older" in line
    proc = torchport("migrate", "--db", old)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("\n") == 1 and "\x1b" not in proc.stdout, proc.stdout
    assert torchport("runs", "--db", old).returncode == 0
