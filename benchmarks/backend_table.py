"""The backends table of docs/backends.md, made from what ``benchmarks/real_backends.sh`` kept:
each backend folder's summaries (``*summary*.txt``, written by ``backend_summary.py``) and the
wall time at the end of each kept command. No figure is typed by hand.

    python benchmarks/backend_table.py [RESULTS_DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402

RESULT = re.compile(
    r"^(?P<case>\S+)\s+(?P<mode>eager|compile)\s+(?P<status>\w+)(?: @(?P<stage>\w+))?"
)
WALL = re.compile(r"^\(wall time (\d+) s\)$", re.M)


def parse(summary: Path) -> dict:
    """Results of one summary file: status counts, grades, host ops, first error per status."""
    statuses: Counter[str] = Counter()
    grades: Counter[str] = Counter()
    host: Counter[str] = Counter()
    errors: dict[str, str] = {}
    torch = ""
    current = None
    for raw in summary.read_text().splitlines():
        if raw.startswith("torch "):
            torch = raw.removeprefix("torch ")
        match = RESULT.match(raw)
        if match:
            current = match
            statuses[match["status"]] += 1
            continue
        text = raw.strip()
        if current is None or not raw.startswith("    "):
            continue
        if text.startswith("grade "):
            grade, _, ops = text.removeprefix("grade ").partition(" (host ops: ")
            grades[grade] += 1
            for op in filter(None, ops.rstrip(")").split(", ")):
                host[op] += 1
        elif text.startswith("error: ") and current["status"] not in errors:
            errors[current["status"]] = text.removeprefix("error: ")[:160]
    return {"statuses": statuses, "grades": grades, "host": host, "errors": errors, "torch": torch}


def cell(counter: Counter[str], unit: str = "{}") -> str:
    return ", ".join(f"{k} {unit.format(v)}" for k, v in counter.most_common()) or "-"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", nargs="?", default="docs/results/backends")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    root = Path(args.results)
    lines = [
        "| backend | torch, packages | summary | results | grades | host ops (results) "
        "| first error per status | wall time of the folder's commands |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        wall = sum(int(s) for f in folder.glob("*.txt") for s in WALL.findall(f.read_text()))
        for i, summary in enumerate(sorted(folder.glob("*summary*.txt"))):
            got = parse(summary)
            errors = "; ".join(f"{s}: {e}" for s, e in got["errors"].items()) or "-"
            lines.append(
                f"| {folder.name} | {got['torch'] or '-'} | `{summary.name}` "
                f"| {cell(got['statuses'])} | {cell(got['grades'])} "
                f"| {cell(got['host'], '({} results)')} "
                f"| {errors.replace('|', '/')} | {f'{wall} s' if i == 0 else ''} |"
            )
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
