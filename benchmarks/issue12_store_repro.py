"""Reproduce issue-12 items 2, 5, 7 (database parts) and 10 before and after the store branch.

"before" runs main at f70da77 unpacked in /tmp/before (``git archive f70da77 | tar -x -C
/tmp/before``) through main's venv with PYTHONPATH; "after" runs this checkout's installed
script. Item 6 (the migration race) is tests/interfaces/test_hostile.py's last test.

    python benchmarks/issue12_store_repro.py before; python benchmarks/issue12_store_repro.py after
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

SIDE = sys.argv[1]
if SIDE == "before":
    PY, ENV = "/work/main/.venv/bin/python", dict(os.environ, PYTHONPATH="/tmp/before/src")
    CLI = [PY, "-m", "torchport.interfaces.cli"]
    OPEN = "open_store(p)"
else:
    PY, ENV = sys.executable, dict(os.environ)
    CLI = [os.path.join(os.path.dirname(sys.executable), "torchport")]
    OPEN = "open_store(p, write=True)"

BUILD = """
import sys
from torchport.records import open_store
p, label, msg = sys.argv[1], sys.argv[2], sys.argv[3]
s = %s
s.create_run(run_id="r1", command="c", suite="smoke", device="cpu", config={"modes": ["eager"]},
             plan=[["a", "eager"]], labels={"note": label})
s.add_result("r1", {"case": "a", "mode": "eager", "status": "eager_fail", "stage": "run",
                    "error": {"type": "E", "message": msg, "traceback": "tb"}})
s.finish_run("r1", "complete")
""".replace("%s", OPEN)
ONE_CASE = [
    "run",
    "--suite",
    "smoke",
    "--cases",
    "mlp",
    "--device",
    "cpu",
    "--probes",
    "none",
    "--modes",
    "eager",
]


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest() if os.path.isfile(path) else None


def cli(*args, cwd):
    proc = subprocess.run(
        CLI + list(args), capture_output=True, text=True, cwd=cwd, env=ENV, timeout=600
    )
    err = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return proc.returncode, (err[-1][:110] if err else ""), len(err), proc.stdout


def build(path, label="x", msg="m"):
    subprocess.run([PY, "-c", BUILD, path, label, msg], env=ENV, check=True, capture_output=True)


def report(item, what, rc, line, nlines, extra=""):
    print(f"{SIDE:6} | {item:4} | {what:38} | exit {rc} | {nlines} stderr lines | {line} {extra}")


def results_root_page(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("select rootpage from sqlite_master where name='results'").fetchone()[0]
    finally:
        conn.close()


def main() -> None:
    d = tempfile.mkdtemp()
    # item 2: markup in a label and in an error message
    p = os.path.join(d, "markup.db")
    build(p, "[/bold]", "boom [/red] [enforce fail at alloc_cpu.cpp:127]")
    for cmd in (["runs"], ["show"], ["results"], ["search", "boom"]):
        rc, line, n, out = cli(*cmd, "--db", p, cwd=d)
        shown = "[enforce fail at alloc_cpu.cpp:127]" in out
        report(
            "2",
            " ".join(cmd) + " (label [/bold], error [/red])",
            rc,
            line,
            n,
            f"| enforce text shown: {shown}",
        )
    # item 5: a foreign file read by runs
    p = os.path.join(d, "other_app.db")
    conn = sqlite3.connect(p)
    conn.execute("create table users(id)")
    conn.commit()
    conn.close()
    before = digest(p)
    rc, line, n, _ = cli("runs", "--db", p, cwd=d)
    conn = sqlite3.connect(p)
    tables = conn.execute("select count(*) from sqlite_master where type='table'").fetchone()[0]
    mode = conn.execute("pragma journal_mode").fetchone()[0]
    conn.close()
    report(
        "5",
        "runs --db other_app.db",
        rc,
        line,
        n,
        f"| changed: {digest(p) != before}, tables {tables}, journal {mode}",
    )
    # item 7: missing table, corrupted page, read-only, /dev/null, cases --db on a bad file
    p = os.path.join(d, "missing.db")
    build(p)
    conn = sqlite3.connect(p)
    conn.execute("drop table result_ops")
    conn.commit()
    conn.close()
    for cmd in (["results", "--fallback-op", "aten.mm"], ONE_CASE):
        h = digest(p)
        rc, line, n, _ = cli(*cmd, "--db", p, cwd=d)
        report(
            "7", cmd[0] + " on a missing table", rc, line, n, f"| file changed: {digest(p) != h}"
        )
    p = os.path.join(d, "corrupt.db")
    build(p)
    with open(p, "r+b") as f:
        f.seek((results_root_page(p) - 1) * 4096)
        f.write(b"\xff" * 64)
    for cmd in (["show"], ONE_CASE):
        h = digest(p)
        rc, line, n, _ = cli(*cmd, "--db", p, cwd=d)
        report(
            "7", cmd[0] + " on a corrupted page", rc, line, n, f"| file changed: {digest(p) != h}"
        )
    p = os.path.join(d, "ro.db")
    build(p)
    os.chmod(p, 0o444)
    h = digest(p)
    rc, line, n, _ = cli(*ONE_CASE, "--db", p, cwd=d)
    report("7", "run on a read-only (0444) file", rc, line, n, f"| file changed: {digest(p) != h}")
    for cmd in (["runs"], ["run", "--suite", "smoke"]):
        rc, line, n, _ = cli(*cmd, "--db", "/dev/null", cwd=d)
        report("7", cmd[0] + " --db /dev/null", rc, line, n)
    junk = os.path.join(d, "junk.db")
    with open(junk, "wb") as f:
        f.write(b"junk" * 100)
    rc, line, n, _ = cli("cases", "smoke", "--db", junk, cwd=d)
    report("7", "cases smoke --db junk.db", rc, line, n)
    # item 10: bad-input run and the database file
    rc, line, n, _ = cli("run", "--suite", "nope", "--db", "fresh.db", cwd=d)
    made = os.path.exists(os.path.join(d, "fresh.db"))
    report("10", "run --suite nope --db fresh.db", rc, line, n, f"| fresh.db exists: {made}")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
