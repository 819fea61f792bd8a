"""Rules about the repository itself: tests stand on their own, without benchmarks/."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_tests_do_not_import_benchmarks():
    """Code a test and a benchmark share lives in src/ or in a tests/ helper; benchmarks/ holds
    scripts that may change or go with their measurement."""
    scripts = {p.stem for p in (REPO / "benchmarks").glob("*.py")} | {"benchmarks"}
    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            else:
                continue
            found += [(str(path), m) for m in modules if m.split(".")[0] in scripts]
    assert found == []
