"""Issue 31's PostgreSQL reads at a million results, each command timed inside the process with
every statement it sends, on a knowledge base filled by ``kb_scale.py``.

    python benchmarks/pg_reads.py --db 'postgresql://...' --trial-v9 --out FILE

``--trial-v9``: a knowledge base still at schema v8 is read as v9 reads it without migrating
it (a migration would make the file unreadable to an older torchport sharing the server):
one transaction adds v9's index (``results(run_id, id)``, under another name beside
``results_run``, so no reader waits on a dropped index), says version 9, runs every command on
that connection and rolls back. Nothing stays. Without it the database is read as it is.

Each command runs in-process (``interfaces.cli.main``: no interpreter start-up, which
``kb_scale.py``'s end-to-end figures include: about 0.15 s, and 0.2 s more to import psycopg),
REPEATS times after one warm-up; the slowest statements of the last run are listed. The
machine is shared: the 1-minute load average is printed next to every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time

import psycopg
from _report import emit, timed

from torchport.interfaces.cli import main
from torchport.kb import open_store, pg_store
from torchport.views.search_more import more_hits

COMMANDS = [
    ["runs"],
    ["search", "cumsum"],
    ["search", "cumsum", "--offset", "10000"],
    ["show", "cuda-2.13"],
    ["results", "--case", "hf/llama-123*"],
    ["results", "--run", "cuda-2.13"],
]


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main_(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--trial-v9", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    lines = [f"$ python benchmarks/pg_reads.py {' '.join(argv)}"]
    conn = psycopg.connect(
        pg_store.libpq_url(args.db), autocommit=True, row_factory=pg_store._row_factory
    )
    conn.execute("BEGIN")
    if args.trial_v9:
        conn.execute("SET LOCAL lock_timeout = '5s'")
        start = time.perf_counter()
        conn.execute("CREATE INDEX results_run_v9_trial ON results(run_id, id)")
        conn.execute("UPDATE torchport_schema SET version = 9 WHERE version < 9")
        lines.append(
            f"read as schema v9 (trial index built in {time.perf_counter() - start:.1f} s, rolled"
            " back at the end)"
        )
    pg_store.PGStore._connect = lambda self: conn  # type: ignore[method-assign]
    pg_store.PGStore._forget = lambda self, c: None  # type: ignore[method-assign]
    log: list[tuple[float, str]] = []
    execute = psycopg.Cursor.execute

    def traced(self, query, params=None, **kw):
        start = time.perf_counter()
        try:
            return execute(self, query, params, **kw)
        finally:
            log.append((time.perf_counter() - start, " ".join(str(query).split())))

    psycopg.Cursor.execute = traced  # type: ignore[method-assign]
    lines.append(f"load average (1 min) at start {load()}")
    lines.append(
        "| command | median s | max s | CPU s | statements (last run) | SQL s (last run)"
        " | lines | load |"
    )
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    slowest: list[str] = []
    for command in COMMANDS:
        out = io.StringIO()

        def run_command(command=command, out=out) -> None:
            log.clear()  # the statements and output of the last run only
            out.seek(0)
            out.truncate()
            with contextlib.redirect_stdout(out):
                try:
                    main([*command, "--db", args.db])
                except SystemExit as exc:
                    if exc.code:
                        raise RuntimeError(f"{command} exited {exc.code}") from None

        median, worst, cpu = timed(run_command, args.repeats)
        sql = sum(dt for dt, _ in log)
        lines.append(
            f"| `{' '.join(command)}` | {median:.3f} | {worst:.3f} | {cpu:.3f} | {len(log)} |"
            f" {sql:.3f} | {out.getvalue().count(chr(10))} | {load()} |"
        )
        for dt, query in sorted(log, reverse=True)[:2]:
            slowest.append(f"- `{' '.join(command)}` {dt * 1000:.0f} ms: {query[:160]}")
    with open_store(args.db, write=False) as store:
        median, worst, _ = timed(lambda: more_hits(store, "cumsum", 50), args.repeats)
    lines.append(
        f"host-op and label search 'cumsum' (views.search_more) in the store: median"
        f" {median * 1000:.0f} ms, max {worst * 1000:.0f} ms (load {load()})"
    )
    lines.append("slowest statements of each command's last run:")
    lines += slowest
    conn.execute("ROLLBACK")
    lines.append(f"load average (1 min) at end {load()}")
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main_(sys.argv[1:]))
