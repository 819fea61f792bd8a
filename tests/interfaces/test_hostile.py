"""Hostile and careless inputs (issue 12): stored text that looks like markup or terminal control,
huge strings, files that are not torchport knowledge bases, read-only and damaged files, and
two processes creating one database. The commands are the installed ``torchport`` script run
from a temp folder; databases are written through the store API, so no case runs here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest

from tests import kb
from tests.conftest import torchport
from torchport.kb import StoreError, open_store
from torchport.kb.sqlite_schema import SCHEMA_VERSION

READ_COMMANDS = (["runs"], ["show"], ["results"], ["search", "llama"], ["cases", "smoke"])
# ``torchport run`` checks its input before it opens the store with ``open_store(db,
# write=True)``; with these flags the checks need no torch. Some cases also open the store for
# writing directly, the call ``run`` makes.
RUN = [
    "run",
    "--suite",
    "smoke",
    "--cases",
    "mlp",
    "--modes",
    "eager",
    "--device",
    "cpu",
    "--probes",
    "none",
]
# Every read command opens the store the same way (cases on its own path): where a check is
# about the path itself, one of each kind is enough.
SOME_READS = (["show"], ["cases", "smoke"])
HUGE = "H" * 200_000 + "END-OF-HUGE"
MARKUP_ERROR = "outside tolerance [/red] at [enforce fail at alloc_cpu.cpp:127] [bold]x"


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _folder(path) -> list[str]:
    return sorted(os.listdir(os.path.dirname(path)))


def _refused_for_writing(path, needle: str) -> None:
    """What ``run`` meets when it opens ``path``; the file stays as it was."""
    before = _digest(path) if os.path.isfile(path) else None
    with pytest.raises(StoreError, match=re.escape(needle)):
        open_store(path, write=True)
    assert (_digest(path) if os.path.isfile(path) else None) == before


def _one_line_exit_2(proc, needle: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def _hostile_results():
    return [
        {
            "case": "hf/llama",
            "mode": "eager",
            "status": "eager_fail",
            "stage": "run",
            "error": {"type": "RuntimeError", "message": MARKUP_ERROR, "traceback": "tb [/]"},
        },
        {
            "case": "hf/llama",
            "mode": "compile",
            "status": "crash",
            "stage": "probe:perf",
            "error": {
                "type": "Esc",
                "message": "bell\x07 clear\x1b[2J cr\r back\x08 rtl\u202e",
                "traceback": None,
            },
        },
        {
            "case": "hf/[bold]gpt2[/bold]",
            "mode": "eager",
            "status": "pass",
            "findings": {"perf": {"step_kind": "[/x]", "notes": ["[/y]"]}},
        },
        {
            "case": "hf/huge",
            "mode": "eager",
            "status": "eager_fail",
            "stage": "run",
            "error": {"type": "E", "message": HUGE, "traceback": HUGE},
        },
        # findings a view does not expect (a list where it reads a mapping)
        {"case": "hf/odd", "mode": "eager", "status": "pass", "findings": {"train": ["?"]}},
    ]


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    return kb.build(
        folder / "kb.db",
        results_=_hostile_results(),
        labels={"note": "[/bold]", "esc": "\x1b]0;title\x07", "huge": HUGE},
        command="torchport run --label 'note=[/bold]'",
        environment={"torch": "[red]2.13[/red]", "cpu": "\x1b[31mred"},
    )


@pytest.mark.parametrize(
    "args",
    [
        ["runs"],
        ["show"],
        ["show", "--detail"],
        ["results"],
        ["search", "llama"],
        ["search", "[/red]"],
        ["results", "--case", "hf/[[]bold*"],
    ],
)
def test_stored_text_prints_as_text(hostile_db, tmp_path, args):
    before = _digest(hostile_db)
    proc = torchport(*args, "--db", hostile_db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out  # escaped, not obeyed
    assert len(out) < 100_000  # a huge string is trimmed ...
    if args[0] == "runs":
        assert "[/bold]" in out and "END-OF-HUGE" in out  # ... in the middle
        assert "\\x1b]0;title\\x07" in out
    if args in (["show"], ["show", "--detail"], ["results"]):
        assert "[enforce fail at alloc_cpu.cpp:127]" in out and "[/red]" in out
        assert "hf/[bold]gpt2[/bold]" in out and "\\x1b[2J" in out
    if args == ["show", "--detail"]:  # the views a plain show leaves to --detail
        assert "[red]2.13[/red]" in out and "[/y]" in out and "[/x]" in out
        assert "train (failed)" in out and "view 'train' failed on run r1" in out
    if args[:2] == ["search", "[/red]"]:
        assert "hf/llama" in out
    if args[:2] == ["results", "--case"]:
        assert "hf/[bold]gpt2[/bold]" in out and "hf/llama" not in out
    assert _digest(hostile_db) == before


def test_json_output_carries_stored_text_exactly(hostile_db, tmp_path):
    proc = torchport("results", "--json", "--db", hostile_db, cwd=tmp_path)
    assert proc.returncode == 0
    by_item = {(r["case"], r["mode"]): r for r in json.loads(proc.stdout)}
    assert by_item["hf/llama", "eager"]["error"]["message"] == MARKUP_ERROR
    assert by_item["hf/llama", "compile"]["error"]["message"].startswith("bell\x07 clear\x1b")
    assert by_item["hf/huge", "eager"]["error"]["message"] == HUGE  # the record, not trimmed


# -- files that are not torchport knowledge bases ---------------------------------------------
def _foreign(path, *, journal="delete", user_version=0):
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users(name) VALUES ('ada')")
    conn.execute(f"PRAGMA user_version = {user_version}")
    conn.commit()
    conn.close()
    return str(path)


def _empty_sqlite(path):
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")  # a valid SQLite file with no tables
    conn.close()
    return str(path)


NOT_OURS = "not a torchport knowledge base"
FOREIGN = "another application's database (tables: users)"


@pytest.mark.parametrize(
    "make,read_needle,run_needle",
    [
        (lambda p: _foreign(p), NOT_OURS, FOREIGN),
        (lambda p: _foreign(p, user_version=7), FOREIGN, FOREIGN),
        (lambda p: _empty_sqlite(p), NOT_OURS, None),  # a run may set up an empty file
        (lambda p: open(p, "wb").close() or str(p), f"{NOT_OURS} (an empty file)", None),
        (
            lambda p: open(p, "wb").write(b"not sqlite\n" * 50) and str(p),
            "not an SQLite database",
            "not an SQLite database",
        ),
    ],
    ids=["foreign", "foreign-versioned", "empty-sqlite", "zero-bytes", "junk"],
)
def test_a_file_that_is_not_a_knowledge_base_is_refused_and_left_as_it_was(
    tmp_path, make, read_needle, run_needle
):
    path = make(tmp_path / "other_app.db")
    before, files = _digest(path), _folder(path)
    for args in READ_COMMANDS:
        _one_line_exit_2(torchport(*args, "--db", path, cwd=tmp_path), read_needle)
        assert _digest(path) == before and _folder(path) == files, args  # no WAL, no journal
    if run_needle:
        _one_line_exit_2(torchport(*RUN, "--db", path, cwd=tmp_path), run_needle)
        _refused_for_writing(path, run_needle)
        assert _folder(path) == files


def test_a_foreign_database_in_wal_mode_is_not_changed_by_reads(tmp_path):
    path = _foreign(tmp_path / "wal_app.db", journal="wal", user_version=3)
    before = _digest(path)
    for args in SOME_READS:
        _one_line_exit_2(torchport(*args, "--db", path, cwd=tmp_path), "another application's")
        assert _digest(path) == before


@pytest.mark.parametrize(
    "db,needle", [("/dev/null", "is not a regular file"), (".", "is a directory")]
)
def test_dev_null_and_a_directory_are_refused(tmp_path, db, needle):
    for args in SOME_READS + (RUN,):
        _one_line_exit_2(torchport(*args, "--db", db, cwd=tmp_path), needle)
    _refused_for_writing(os.path.join(tmp_path, db), needle)
    assert os.listdir(tmp_path) == []
    _refused_for_writing(str(tmp_path / "no" / "kb.db"), "does not exist; create it")


def test_bad_input_to_run_leaves_no_database_behind(tmp_path):
    # An unknown suite is found after the store is opened (planning needs the suite).
    proc = torchport("run", "--suite", "nope", "--device", "cpu", "--db", "new.db", cwd=tmp_path)
    _one_line_exit_2(proc, "unknown suite 'nope'")
    assert os.listdir(tmp_path) == []


# -- torchport's own files, damaged or protected ------------------------------------------------
@pytest.fixture
def good_db(tmp_path):
    return kb.build(tmp_path / "kb.db")


def _page_of(path, table: str) -> int:
    with open_store(path, write=False):
        pass
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()[0]
    finally:
        conn.close()


def _clobber(path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_a_read_only_database_refuses_a_run_and_still_reads(good_db, tmp_path):
    os.chmod(good_db, 0o444)
    before = _digest(good_db)
    _one_line_exit_2(torchport(*RUN, "--db", good_db, cwd=tmp_path), "is read-only")
    assert _digest(good_db) == before
    proc = torchport("runs", "--db", good_db, "--json", cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)[0]["id"] == "r1"


def test_a_damaged_page_is_one_line_for_every_command(good_db, tmp_path):
    page = _page_of(good_db, "results")
    _clobber(good_db, (page - 1) * 4096, b"\xff" * 64)
    before = _digest(good_db)
    for args in (["results"], ["show"], ["search", "llama"], RUN):
        _one_line_exit_2(torchport(*args, "--db", good_db, cwd=tmp_path), "is damaged")
    # 'runs' counts from an index (schema v3) and never reads the damaged table page.
    assert torchport("runs", "--db", good_db, cwd=tmp_path).returncode == 0
    assert _digest(good_db) == before  # run refused before recording anything


def test_a_clobbered_header_is_not_a_database(good_db, tmp_path):
    _clobber(good_db, 0, b"garbage!" * 4)
    for args in SOME_READS:
        _one_line_exit_2(torchport(*args, "--db", good_db, cwd=tmp_path), "not an SQLite")
    _refused_for_writing(good_db, "not an SQLite database")


def test_a_missing_table_is_named(good_db, tmp_path):
    conn = sqlite3.connect(good_db)
    conn.execute("DROP TABLE result_ops")
    conn.commit()
    conn.close()
    before = _digest(good_db)
    for args in READ_COMMANDS + (RUN,):
        _one_line_exit_2(
            torchport(*args, "--db", good_db, cwd=tmp_path),
            "damaged torchport knowledge base (missing table result_ops)",
        )
    assert _digest(good_db) == before


def test_a_newer_schema_is_refused_by_reads_and_runs(good_db, tmp_path):
    conn = sqlite3.connect(good_db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = _digest(good_db)
    _one_line_exit_2(torchport("runs", "--db", good_db, cwd=tmp_path), "newer than this")
    _refused_for_writing(good_db, "newer than this")
    assert _digest(good_db) == before


# -- two processes creating one database ---------------------------------------------------------
_STARTER = """
import sys, time
from torchport.kb import open_store
path, run_id, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
time.sleep(max(0.0, start_at - time.time()))
store = open_store(path, write=True)
store.create_run(run_id=run_id, command="c", suite="smoke", device="cpu", config={},
                 plan=[], labels={})
store.add_results(run_id, [{"case": "a", "mode": "eager", "status": "pass"}])
"""


def test_concurrent_starts_on_a_new_database_migrate_it_once(tmp_path):
    for attempt in range(3):  # the unguarded migration failed every attempt
        path = tmp_path / f"new{attempt}.db"
        start_at = time.time() + 1.0  # past both interpreters' start-up
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _STARTER, str(path), f"run{i}", str(start_at)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        errors = [child.communicate(timeout=60)[1] for child in children]
        assert [c.returncode for c in children] == [0, 0, 0, 0], errors
        with open_store(str(path), write=False) as store:
            assert store.schema_version() == SCHEMA_VERSION
            assert sorted(r["id"] for r in store.runs()) == ["run0", "run1", "run2", "run3"]


def test_a_note_checks_only_the_tables_it_writes(good_db, tmp_path):
    """A damaged results page does not stop a note (it never touches results: a million-result
    file is not read whole before each note); a damaged notes page does, in one line."""
    page = _page_of(good_db, "results")
    _clobber(good_db, (page - 1) * 4096, b"\xff" * 64)
    proc = torchport("note", "r1", "accepted", "--db", good_db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _one_line_exit_2(torchport(*RUN, "--db", good_db, cwd=tmp_path), "is damaged")
    page = _page_of(good_db, "notes")
    _clobber(good_db, (page - 1) * 4096, b"\xff" * 64)
    before = _digest(good_db)
    _one_line_exit_2(torchport("note", "r1", "again", "--db", good_db, cwd=tmp_path), "is damaged")
    assert _digest(good_db) == before
