"""Issue 35 (8, 10): an import file is checked whole, every line kind and field type, before
anything is written; a bad one is one line, exit 2, creates no knowledge base and changes
none. A run exported while ``running`` arrives ``interrupted``; passwords in a recorded URL
are never stored or shown; an interrupted whole-database import leaves no temporary export."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys

import pytest

from tests import kb
from tests.interfaces.inproc import invoke, one_line
from torchport.kb import open_store
from torchport.kb.exchange import export_runs


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = kb.build(tmp_path_factory.mktemp("imp") / "a.db")
    with open_store(path, write=True) as store:
        store.add_note("r1", "a note", author="ana")
    return path


def _export_lines(path) -> list[dict]:
    out = io.StringIO()
    with open_store(path, write=False) as store:
        export_runs(store, ["r1"], out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


DEEP = "deep-nesting-marker"
NESTED = "[" * 100_000 + "1" + "]" * 100_000  # past any JSON parser's recursion


def _write(tmp_path, lines, name="x.jsonl") -> str:
    path = tmp_path / name
    text = "".join(json.dumps(obj) + "\n" for obj in lines)
    path.write_text(text.replace(json.dumps(DEEP), NESTED))
    return str(path)


def _first(lines, kind) -> dict:
    return next(obj for obj in lines if obj["kind"] == kind)


DAMAGES = {
    "deep nesting": lambda ls: _first(ls, "result")["findings"].update(x=DEEP),
    "environment without data": lambda ls: _first(ls, "environment").pop("data"),
    "note without text": lambda ls: _first(ls, "note").pop("text"),
    "note with a dict as text": lambda ls: _first(ls, "note").update(text={"a": 1}),
    "artifact size past 64 bits": lambda ls: ls.insert(
        -1, {"kind": "artifact", "run_id": "r1", "path": "/x", "sha256": None, "bytes": 2**70}
    ),
    "run labels not text": lambda ls: _first(ls, "run").update(labels={"a": [1]}),
    "unknown run state": lambda ls: _first(ls, "run").update(state="paused"),
    "op table row without count": lambda ls: _first(ls, "result").update(
        ops=[{"op": "aten.add", "device": "cpu"}]
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_bad_line_is_one_line_and_creates_no_knowledge_base(source, tmp_path, damage):
    lines = _export_lines(source)
    DAMAGES[damage](lines)
    path = _write(tmp_path, lines)
    target = tmp_path / "new.db"
    one_line(invoke("import", path, "--db", target), "line")
    assert not target.exists()


def test_a_bad_line_changes_no_existing_knowledge_base(source, tmp_path):
    target = kb.build(tmp_path / "kb.db", run_id="other")
    before = hashlib.sha256(open(target, "rb").read()).hexdigest()
    lines = _export_lines(source)
    _first(lines, "note")["text"] = {"a": 1}
    one_line(invoke("import", _write(tmp_path, lines), "--db", target), "'text' is not str")
    assert hashlib.sha256(open(target, "rb").read()).hexdigest() == before


def test_a_run_exported_while_running_arrives_interrupted_and_can_be_resumed(source, tmp_path):
    lines = _export_lines(source)
    run = _first(lines, "run")
    run.update(state="running", finished_at=None, host="elsewhere")
    path = _write(tmp_path, lines)
    target = str(tmp_path / "t.db")
    assert invoke("import", path, "--db", target).code == 0
    again = invoke("import", path, "--db", target)  # the same file: present, not a conflict
    assert again.code == 0 and "already present" in again.stdout
    with open_store(target, write=True) as store:
        assert store.get_run("r1")["state"] == "interrupted"
        store.update_run("r1", state="running")  # what --resume does: not refused as "still going"
        store.update_run("r1", state="complete")
    assert invoke("export", "r1", "-o", tmp_path / "back.jsonl", "--db", target).code == 0


def test_a_password_in_a_url_query_is_never_stored_or_shown(tmp_path):
    secret = "s3cr3t-pw"
    command = f"torchport run --db postgresql://ana@db.example/kb?sslmode=require&password={secret}"
    path = kb.build(tmp_path / "a.db", command=command)
    with open_store(path, write=False) as store:
        assert secret not in store.get_run("r1")["command"]
        assert "password=***" in store.get_run("r1")["command"]
    for args in (["runs", "--json"], ["show", "r1", "--json"], ["show", "r1"]):
        out = invoke(*args, "--db", path)
        assert out.code == 0 and secret not in out.stdout + out.stderr
    exported = tmp_path / "r1.jsonl"
    assert invoke("export", "r1", "-o", exported, "--db", path).code == 0
    assert secret not in exported.read_text()
    # an export made elsewhere that still holds one: stored without it
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    _first(lines, "run")["command"] = command
    target = tmp_path / "t.db"
    assert invoke("import", _write(tmp_path, lines), "--db", target).code == 0
    assert secret not in open(target, "rb").read().decode(errors="replace")


SIGTERM_DURING_EXPORT = """
import os, signal, sys
from torchport.kb import exchange
real = exchange.export_runs
def export_then_die(store, run_ids, out):
    counts = real(store, run_ids, out)
    out.flush()
    os.kill(os.getpid(), signal.SIGTERM)  # the user's kill, mid-import
    return counts
exchange.export_runs = export_then_die
from torchport.interfaces.cli import main
main(sys.argv[1:])
"""


def test_an_interrupted_whole_database_import_leaves_no_temporary_export(source, tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    target = tmp_path / "t.db"
    proc = subprocess.run(
        [sys.executable, "-c", SIGTERM_DURING_EXPORT, "import", source, "--db", target],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, TMPDIR=str(temp)),
    )
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert os.listdir(temp) == []  # the plaintext export went with its folder
    assert not target.exists()
