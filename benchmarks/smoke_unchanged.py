"""Two knowledge bases' results side by side (status, grade, fallback ops, host-kernel ops per
case and mode): the same suite before and after a change, each in its own database.

    python benchmarks/smoke_unchanged.py BEFORE.db AFTER.db
"""

import json
import subprocess
import sys


def load(db: str) -> dict:
    shown = subprocess.run(
        ["torchport", "show", "--db", db, "--json"], capture_output=True, text=True, check=True
    )
    rows = {}
    for r in json.loads(shown.stdout)["results"]:
        f = r.get("findings") or {}
        rows[(r["case"], r["mode"])] = (
            r["status"],
            r.get("grade"),
            tuple(sorted(f.get("fallback_ops") or {})),
            tuple(sorted(f.get("host_kernel_ops") or {})),
        )
    return rows


def main(before: str, after: str) -> None:
    a, b = load(before), load(after)
    keys = sorted(set(a) | set(b))
    for key in keys:
        if a.get(key) != b.get(key):
            print("DIFF", key, "\n  before:", a.get(key), "\n  after: ", b.get(key))
    same = sum(a.get(k) == b.get(k) for k in keys)
    print(f"{same} / {len(keys)} results identical (status, grade, fallback ops, host-kernel ops)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
