"""The status words are spelled once, in records/status.py: no other module of src/ holds a
tuple, list or set of status names written out (it reads NOT_FAILURES, COMPILE_STOPS, PASS ...
there), and the grades a run's headline counts, spelled in SQL by run_tallies' trigger
(migration 0008 of each engine), are the ones status.py declares."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from torchport.kb import schema
from torchport.records.status import HEADLINE_GRADES, STATUSES, sql_list

SRC = Path(__file__).resolve().parents[2] / "src" / "torchport"
HOME = SRC / "records" / "status.py"


def written_out(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """(line, names) of each tuple, list or set whose items are string literals, two or more,
    every one a status name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2:
            words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if len(words) == len(node.elts) and all(w in STATUSES for w in words):
                found.append((node.lineno, words))
    return found


def test_no_module_but_status_py_writes_out_a_collection_of_statuses():
    offending = [
        f"{path.relative_to(SRC.parent)}:{line}: {words}"
        for path in sorted(SRC.rglob("*.py"))
        if path != HOME
        for line, words in written_out(ast.parse(path.read_text(), str(path)))
    ]
    assert offending == [], "read them from records/status.py:\n" + "\n".join(offending)


@pytest.mark.parametrize(
    "code,caught",
    [
        ('if s not in ("pass", "skip"): pass', True),
        ("x = ['crash', 'timeout', 'oom']", True),
        ("x = {'pass', 'compile_timeout'}", True),
        ('x = ("pass", "fail", "skip")', False),  # "fail" is no status: another vocabulary
        ('x = ("pass",)', False),
        ("x = (PASS, SKIP)", False),
    ],
)
def test_the_check_catches_what_it_names(code, caught):
    assert bool(written_out(ast.parse(code))) == caught


@pytest.mark.parametrize("folder", ["migrations", "migrations_pg"])
def test_the_tally_triggers_count_the_headline_grades(folder):
    """run_tallies keeps a host-op table only for HEADLINE_GRADES; migration 0008 spells them
    in SQL (a migration is history: it is never rewritten), so they must stay equal."""
    script = dict(schema.migrations(folder))[8]
    lists = re.findall(r"grade IN (\([^)]*\))", script)
    assert len(lists) == 2, lists  # the trigger and the back-fill
    assert set(lists) == {sql_list(HEADLINE_GRADES)}
