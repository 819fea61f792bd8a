"""The knowledge base at the field's volume: 1 000 000 results, then every read command timed
end to end with the installed ``torchport`` script.

Fills a knowledge base through the store (``Store.add_results``, one transaction per batch:
a commit per result costs a disk sync each; the one-by-one rate is measured too and printed)
with synthetic results written through the real schema: RUNS runs (CPU and CUDA, five
releases) x CASES cases (the hf suite's real ids, then ``hf/<type>-<n>`` variants) x 2 modes,
with realistic statuses, error messages, tracebacks, metrics, host-op tables and run-to-run
changes. Then each command runs REPEATS times (after one warm-up) as a user runs it, its wall
time taken around the process and its peak resident set from ``/usr/bin/time -v``. A few
figures are also taken inside the store (search first page p95).

    python benchmarks/kb_scale.py --db /tmp/kb_scale.db --out docs/results/kb_scale.txt
    python benchmarks/kb_scale.py --db postgresql://postgres@/kb_scale?host=/tmp/pg&port=55432 \
        --out docs/results/kb_scale_pg.txt

With a PostgreSQL URL the database is dropped and created again on its server (the URL's user
must be allowed to), the one-by-one rate and the import use scratch databases beside it, and
the size is the server's pg_database_size.

``--fill-only`` fills the knowledge base and stops; ``--reuse`` times the reads on one filled
before (a million results take minutes of CPU to write: fill once, measure many times). A
file of an older schema is migrated first (``torchport migrate``: reads refuse an older one).

Besides the commands, figures inside the process: the search's first page, the run headline
(counts of every run, one run's medians, the placement summary of a comparison, the host-op
search), and the dashboard's compare page at its first look (each request another pair of
100 000-result runs, through the ASGI app in-process, as ``web_pages.py`` times every page).

The machine is shared: the 1-minute load average is printed next to every figure.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from _report import emit, time_v, timed  # noqa: E402

import torchport  # noqa: E402
from torchport.kb import open_store  # noqa: E402

TORCHPORT = os.path.join(os.path.dirname(sys.executable), "torchport")
from tests.synthetic_kb import MODES, case_ids, fill, result  # noqa: E402


def _is_pg(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def _pg_admin(url: str):
    """A connection to the maintenance database of ``url``'s server, and ``url``'s database."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    return psycopg.connect(admin, autocommit=True), parts.path.lstrip("/")


def _pg_url(url: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def reset(url: str) -> None:
    """An empty knowledge base at ``url``: the file removed, or the database made again."""
    if not _is_pg(url):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(url + suffix):
                os.unlink(url + suffix)
        return
    conn, name = _pg_admin(url)
    with conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')


def size_bytes(url: str) -> int:
    if _is_pg(url):
        conn, name = _pg_admin(url)
        with conn:
            return int(conn.execute("SELECT pg_database_size(%s)", (name,)).fetchone()[0])
    wal = url + "-wal"
    return os.path.getsize(url) + (os.path.getsize(wal) if os.path.exists(wal) else 0)


@contextlib.contextmanager
def scratch(url: str, name: str):
    """A new knowledge base beside ``url`` (a file in a temporary folder, or a database on the
    same server), removed afterwards."""
    if _is_pg(url):
        other = _pg_url(url, f"{_pg_admin(url)[1]}_{name}")
        reset(other)
        try:
            yield other
        finally:
            conn, db = _pg_admin(other)
            with conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        return
    folder = tempfile.mkdtemp(prefix=f"kb-{name}-")
    try:
        yield os.path.join(folder, "kb.db")
    finally:
        shutil.rmtree(folder)


def engine_line(url: str) -> str:
    if _is_pg(url):
        conn, _ = _pg_admin(url)
        with conn:
            return "PostgreSQL " + conn.execute("SHOW server_version").fetchone()[0]
    return f"sqlite {__import__('sqlite3').sqlite_version}"


def one_by_one_rate(url: str, cases: list[str], n: int = 300) -> float:
    """Results per second one by one (``add_results`` of one, a commit each), on a fresh
    knowledge base."""
    with scratch(url, "one") as fresh:
        with open_store(fresh, write=True) as store:
            store.create_run(
                run_id="r", command="c", suite="hf", device="cpu", config={}, plan=[], labels={}
            )
            items = [result(c, "eager", 0, "cpu") for c in cases[:n]]
            start = time.perf_counter()
            for item in items:
                store.add_results("r", [item])
            took = time.perf_counter() - start
            store.update_run("r", state="complete")
            return n / took


def run_command(args: list[str], cwd: str) -> tuple[float, int, int, int, float]:
    """(wall s, peak RSS bytes, stdout lines, exit code, CPU s) of one run of the installed
    script. The CPU time (user + system, from /usr/bin/time -v) is what the process itself
    spent: on a loaded machine its wall time is mostly waiting for a core, its CPU time is
    not (the PostgreSQL server's own CPU is not in it)."""
    start = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-v", TORCHPORT, *args], capture_output=True, text=True, cwd=cwd
    )
    wall = time.perf_counter() - start
    cpu, rss = time_v(proc.stderr)
    return wall, rss, proc.stdout.count("\n"), proc.returncode, cpu


def time_command(label: str, args: list[str], repeats: int, cwd: str) -> list:
    run_command(args, cwd)  # warm-up: the file's pages in the OS cache, as for a user's
    samples, loads = [], []
    for _ in range(repeats):
        samples.append(run_command(args, cwd))
        loads.append(os.getloadavg()[0])
    walls = [s[0] for s in samples]
    print(f"  {label}: {statistics.median(walls):.2f} s", file=sys.stderr, flush=True)
    return [
        label,
        statistics.median(walls),
        max(walls),
        max(s[1] for s in samples),
        samples[-1][2],
        samples[-1][3],
        statistics.median(loads),
        statistics.median(s[4] for s in samples),
    ]


def store_figures(path: str, run_a: str, run_b: str, hf_ids: list[str]) -> list[str]:
    """Figures inside the store (no process start, no rendering)."""
    lines = []
    with open_store(path, write=False) as store:
        times = []
        terms = (
            "cumsum",
            "llama",
            "signal",
            "NotImplementedError",
            "memory",
            "neuron backend",
            "qwen3",
            "tolerance",
            "shape invalid",
            "index_put_impl_",
        )
        for _ in range(5):
            for term in terms:
                start = time.perf_counter()
                store.search(term, limit=50)
                times.append(time.perf_counter() - start)
        times.sort()
        p95 = times[int(0.95 * (len(times) - 1))]
        lines.append(
            f"search first page (50, ranked) inside the store: p50 "
            f"{statistics.median(times) * 1e3:.1f} ms, p95 {p95 * 1e3:.1f} ms over "
            f"{len(times)} queries ({len(terms)} terms x 5)"
        )
        start = time.perf_counter()
        total = store.search("cumsum", count=True)
        took_ms = 1e3 * (time.perf_counter() - start)
        lines.append(f"count of 'cumsum' matches: {total} in {took_ms:.1f} ms")
        start = time.perf_counter()
        found = store.history(cases=hf_ids)
        lines.append(
            f"last status of the {len(hf_ids)} hf suite cases (2 indexed lookups "
            f"each): {1e3 * (time.perf_counter() - start):.1f} ms, {len(found)} found"
        )
        from torchport.views.compare import compare_runs

        start = time.perf_counter()
        cmp = compare_runs(store, run_a, run_b)
        lines.append(
            f"compare {run_a} {run_b} inside the store: "
            f"{time.perf_counter() - start:.2f} s ({cmp.common} pairs, "
            f"{len(cmp.newly_failing)} newly failing, {len(cmp.newly_passing)} newly "
            f"passing, {len(cmp.perf)} step-time changes beyond noise)"
        )
        lines += headline_figures(store, run_a, run_b)
    return lines


def headline_figures(store, run_a: str, run_b: str) -> list[str]:
    """The run headline's reads (views/headline.py, compare_placement.py, search_more.py)."""
    from torchport.views.compare_placement import placement_summary
    from torchport.views.headline import run_headlines
    from torchport.views.search_more import more_hits

    runs = store.runs()
    a, b = (store.get_run(r, plan=False) for r in (run_a, run_b))
    reads = [
        ("headline counts of every run (store.headline)", lambda: store.headline()),
        ("every run's headline (views.headline.run_headlines)", lambda: run_headlines(store, runs)),
        (
            f"medians of {run_b} (store.headline, figures)",
            lambda: store.headline(run_b, figures=True),
        ),
        (f"placement summary {run_a} -> {run_b}", lambda: placement_summary(store, a, b)),
        (
            "host-op and label search 'cumsum' (views.search_more)",
            lambda: more_hits(store, "cumsum", 50),
        ),
    ]
    lines = []
    for label, fn in reads:
        median, worst, cpu = timed(fn)
        lines.append(
            f"{label}: median {median * 1e3:.0f} ms, max {worst * 1e3:.0f} ms, this process's "
            f"CPU {cpu * 1e3:.0f} ms (load {os.getloadavg()[0]:.1f})"
        )
    return lines


def compare_page(url: str, run_ids: list[str]) -> list[str]:
    """The dashboard's compare page at its first look: each request compares another older
    run with the newest (the server's memo misses), 3 as HTML and 3 as JSON."""
    from starlette.testclient import TestClient
    from web_pages import compare_path, first_look_row

    from torchport.interfaces.web.app import create_app

    newest = run_ids[-1]
    firsts = [compare_path(r, newest) for r in run_ids[-8:-2]]
    with open_store(url, write=False) as store:
        client = TestClient(create_app(store), base_url="http://localhost")
        client.get("/")  # templates loaded, as on a server that has shown a page
        row = first_look_row(f"compare A {newest}, first look", firsts, client)
    return [
        "",
        "| page | HTML median ms | HTML max ms | JSON median ms | JSON max ms | bytes (HTML) "
        "| status | < 300 ms | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        row,
        "the compare page through the ASGI app in-process (Starlette's TestClient: routing, "
        "store reads, views, templates; no socket or browser), each request another pair of "
        "100 000-result runs",
    ]


def _copy_rows(pg, target: str, rows) -> int:
    """COPY ``rows`` (an SQLite cursor) into PostgreSQL's ``target`` (``table(cols)``); the
    number of rows copied."""
    n = 0
    with pg.cursor().copy(f"COPY {target} FROM STDIN") as copy:
        for row in rows:
            copy.write_row(tuple(row))
            n += 1
    return n


def copy_runs(source: str, url: str) -> tuple[list[str], int]:
    """Copy the complete runs of the SQLite knowledge base ``source`` into the PostgreSQL one
    at ``url`` (made if it is empty), with COPY: the same rows, ids included, loaded in
    seconds where inserting them one by one from a loaded machine takes hours. The server's
    row triggers fire for every copied result as for an insert (full text, run tallies).
    Runs already there are skipped. Returns (the runs copied, the results copied)."""
    import sqlite3

    import psycopg

    with open_store(url, write=True):
        pass  # the schema, migrated to this torchport's
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    src.row_factory = sqlite3.Row
    copied, results = [], 0
    with psycopg.connect(url) as pg:
        # Row triggers off while copying (the URL's user must be a superuser): the full text
        # and the run tallies are then made for every copied result in one statement each,
        # the statements the triggers run, set-based (per-row triggers under a loaded
        # machine's server take an hour for a million rows).
        pg.execute("SET session_replication_role = replica")

        def columns(table: str) -> list[str]:
            here = {r[1] for r in src.execute(f"PRAGMA table_info({table})")}
            there = pg.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
                " AND is_generated = 'NEVER' AND identity_generation IS DISTINCT FROM 'ALWAYS'"
                " ORDER BY ordinal_position",
                (table,),
            )
            return [c for (c,) in there if c in here]

        have = {r[0] for r in pg.execute("SELECT id FROM runs")}
        runs = src.execute("SELECT * FROM runs WHERE state = 'complete' ORDER BY rowid").fetchall()
        run_cols, env_cols = columns("runs"), columns("environments")
        result_cols, op_cols = columns("results"), columns("result_ops")
        for run in runs:
            if run["id"] in have:
                continue
            with pg.transaction():
                envs = src.execute(
                    "SELECT e.* FROM environments e JOIN run_environments r ON r.environment_id"
                    " = e.id WHERE r.run_id = ?",
                    (run["id"],),
                ).fetchall()
                for env in envs:
                    pg.execute(
                        f"INSERT INTO environments({', '.join(env_cols)}) VALUES"
                        f" ({', '.join(['%s'] * len(env_cols))}) ON CONFLICT DO NOTHING",
                        [env[c] for c in env_cols],
                    )
                pg.execute(
                    f"INSERT INTO runs({', '.join(run_cols)}) VALUES"
                    f" ({', '.join(['%s'] * len(run_cols))})",
                    [run[c] for c in run_cols],
                )
                for row in src.execute(
                    "SELECT run_id, environment_id, recorded_at FROM run_environments"
                    " WHERE run_id = ?",
                    (run["id"],),
                ):
                    pg.execute(
                        "INSERT INTO run_environments(run_id, environment_id, recorded_at)"
                        " VALUES (%s, %s, %s)",
                        tuple(row),
                    )
                results += _copy_rows(
                    pg,
                    f"results({', '.join(result_cols)})",
                    src.execute(
                        f"SELECT {', '.join(result_cols)} FROM results WHERE run_id = ?"
                        " ORDER BY id",
                        (run["id"],),
                    ),
                )
                _copy_rows(
                    pg,
                    f"result_ops({', '.join(op_cols)})",
                    src.execute(
                        f"SELECT {', '.join('o.' + c for c in op_cols)} FROM result_ops o"
                        " JOIN results r ON r.id = o.result_id WHERE r.run_id = ? ORDER BY o.rowid",
                        (run["id"],),
                    ),
                )
            copied.append(run["id"])
            print(f"  copied {run['id']}", file=sys.stderr, flush=True)
        pg.execute("SELECT setval(pg_get_serial_sequence('results', 'id'), max(id)) FROM results")
        pg.execute("SET session_replication_role = DEFAULT")
        pg.execute("DROP INDEX IF EXISTS results_fts_document")  # built once, after
        pg.execute(FTS_FILL)
        pg.execute("CREATE INDEX results_fts_document ON results_fts USING GIN (document)")
        if copied:
            pg.execute("DELETE FROM run_tallies WHERE run_id = ANY(%s)", (copied,))
            pg.execute(TALLY_FILL, (copied,))
        pg.commit()
    return copied, results


# What migrations_pg/0001's results_fts_insert and 0008's torchport_tally do per row, for every
# copied result at once.
FTS_FILL = (
    "INSERT INTO results_fts(id, document) SELECT r.id,"
    " setweight(to_tsvector('simple', torchport_words(r.case_id)), 'A')"
    " || setweight(to_tsvector('simple', torchport_words(r.error_message)), 'B')"
    " || setweight(to_tsvector('simple', torchport_words(r.traceback)), 'D')"
    " FROM results r WHERE NOT EXISTS (SELECT 1 FROM results_fts f WHERE f.id = r.id)"
)
TALLY_FILL = (
    "INSERT INTO run_tallies(run_id, status, stage, grade, signature, host_ops, n)"
    " SELECT run_id, status, COALESCE(stage, ''), COALESCE(grade, ''), COALESCE(signature, ''),"
    " CASE WHEN grade IN ('fallback', 'host') THEN COALESCE(host_ops, '') ELSE '' END, COUNT(*)"
    " FROM results WHERE run_id = ANY(%s) GROUP BY 1, 2, 3, 4, 5, 6"
)


def migrate(url: str) -> str | None:
    """``torchport migrate`` on ``url`` (reads refuse an older schema); what it took, or None
    when nothing was to do."""
    from torchport.kb.store import migrate as migrate_store

    start = time.perf_counter()
    done = migrate_store(url)
    if done.after == done.before:
        return None
    return f"migrated schema v{done.before} -> v{done.after} in {time.perf_counter() - start:.1f} s"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default=os.path.join(tempfile.gettempdir(), "kb_scale.db"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cases", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=5000, help="Results per transaction.")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="Keep an existing --db.")
    parser.add_argument("--fill-only", action="store_true", help="Fill --db, time nothing.")
    parser.add_argument(
        "--copy-from",
        default=None,
        metavar="SQLITE",
        help="PostgreSQL --db: COPY the complete runs of this filled SQLite file, time nothing.",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cases = case_ids(args.cases)
    hf_ids = cases[:196]
    # The package's bytecode, as an installed one has it: an editable tree under
    # PYTHONDONTWRITEBYTECODE (set on the machine this ran on) compiles each module it
    # imports on every command (0.05-0.1 s of each command's CPU; benchmarks/reads_ab.py)
    compileall.compile_dir(os.path.dirname(torchport.__file__), quiet=1)
    lines = [
        f"$ python benchmarks/kb_scale.py {' '.join(argv or sys.argv[1:])}",
        f"{os.cpu_count()} logical cores, shared with other engineers' jobs; "
        f"{engine_line(args.db)}; load average (1 min) at start "
        f"{os.getloadavg()[0]:.2f}; speed reference (speed_reference) "
        f"{speed_reference():.1f} ms",
    ]
    if args.copy_from:
        start = time.perf_counter()
        copied, n = copy_runs(args.copy_from, args.db)
        import psycopg

        with psycopg.connect(args.db, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")  # visibility maps and statistics, as autovacuum would
        lines.append(
            f"copied {n} results in {len(copied)} runs ({', '.join(copied)}) from "
            f"{args.copy_from} with COPY in {time.perf_counter() - start:.0f} s, then VACUUM "
            f"ANALYZE; load average at end {os.getloadavg()[0]:.2f}"
        )
        emit(lines, args.out)
        return
    if not args.fill_only:
        rate = one_by_one_rate(args.db, cases)
        lines.append(
            f"add_result one by one (a commit each): {rate:.0f} results/s, so 1 000 000 "
            f"would take {1e6 / rate / 3600:.1f} h; the fill uses add_results, "
            f"{args.batch} per transaction"
        )
    if not args.reuse:
        reset(args.db)
        start = time.perf_counter()
        run_ids = fill(args.db, args.runs, cases, args.batch)
        took = time.perf_counter() - start
        n = args.runs * len(cases) * len(MODES)
        lines.append(
            f"fill: {n} results in {args.runs} runs, {took:.0f} s "
            f"({n / took:.0f} results/s), load average at end "
            f"{os.getloadavg()[0]:.2f}"
        )
        if args.fill_only:
            emit(lines, args.out)
            return
    else:
        with open_store(args.db, write=False) as store:
            run_ids = [r["id"] for r in reversed(store.runs())]
        lines.append("fill: reused the existing knowledge base")
        migrated = migrate(args.db)
        if migrated:
            lines.append(migrated)
    size = size_bytes(args.db)
    with open_store(args.db, write=False) as store:
        total = store.results(count=True)
    lines.append(f"knowledge base: {total} results, {size / 2**30:.2f} GiB")
    run_a, run_b = run_ids[-3], run_ids[-1]  # the same device, two releases
    per_run = len(cases) * len(MODES)
    cwd = tempfile.mkdtemp(prefix="kb-scale-")
    db = ["--db", args.db]
    expected = os.path.join(cwd, "expected.json")
    exported = os.path.join(cwd, "run.jsonl")
    commands = [
        ("runs", ["runs", *db], args.repeats),
        ("search cumsum", ["search", "cumsum", *db], args.repeats),
        (
            "search cumsum --offset 10000",
            ["search", "cumsum", "--offset", "10000", *db],
            args.repeats,
        ),
        (f"show {run_b} (summary)", ["show", run_b, *db], args.repeats),
        (
            "results --case 'hf/llama-123*'",
            ["results", "--case", "hf/llama-123*", *db],
            args.repeats,
        ),
        (f"results --run {run_b} (first page)", ["results", "--run", run_b, *db], args.repeats),
        ("cases hf", ["cases", "hf", *db], 3),
        ("cases smoke", ["cases", "smoke", *db], 3),
        (f"compare {run_a} {run_b}", ["compare", run_a, run_b, *db], 3),
        (f"compare {run_a} {run_b} --json", ["compare", run_a, run_b, "--json", *db], 3),
        (f"baseline save {run_b}", ["baseline", "save", run_b, "-o", expected, *db], 3),
        (f"gate {run_b} --baseline", ["gate", run_b, "--baseline", expected, *db], 3),
        (f"export {run_b} ({per_run} results)", ["export", run_b, "-o", exported, *db], 3),
    ]
    # The reads inside the store and the compare page first: an export streams a whole run's
    # rows (100 MB) through PostgreSQL's shared buffers (128 MB here) and evicts the index
    # the page reads (527 ms right after it, 180-270 ms otherwise), and an import of 100 000
    # results churns them and checkpoints in the background (453 ms after it).
    store_reads = store_figures(args.db, run_a, run_b, hf_ids) + compare_page(args.db, run_ids)
    rows = [time_command("--help (start-up)", ["--help"], args.repeats, cwd)]
    rows += [time_command(label, argv_, repeats, cwd) for label, argv_, repeats in commands]
    # The suite listing alone (no knowledge base): what 'cases hf' costs before any lookup.
    empty = os.path.join(cwd, "none")
    os.makedirs(empty)
    rows.append(time_command("cases hf (no knowledge base)", ["cases", "hf"], 3, empty))
    # Writes on the big file: a note (the write open checks the file first), an import.
    rows.append(time_command(f"note {run_b} (write)", ["note", run_b, "bench note", *db], 1, cwd))
    with scratch(args.db, "import") as target:
        rows.append(
            [
                f"import ({per_run} results) into a new knowledge base",
                *_once(["import", exported, "--db", target], cwd),
            ]
        )
    lines.append("")
    lines.append(
        "| command | median s | max s | CPU s (median) | peak RSS MB | output lines | exit | load |"
    )
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, median, worst, rss, out_lines, code, load, cpu in rows:
        lines.append(
            f"| `{label}` | {median:.2f} | {worst:.2f} | {cpu:.2f} | {rss / 2**20:.0f} | "
            f"{out_lines} | {code} | {load:.1f} |"
        )
    lines.append("")
    lines.append(
        f"median and max of {args.repeats} timed runs after one warm-up (3 for the "
        "slower commands, 1 for writes), wall time around the process, peak RSS from "
        "/usr/bin/time -v, CPU s the process's user + system time (the server's not in it); "
        "the gate holds a run to its own baseline (exit 0)"
    )
    lines.extend(store_reads)
    lines.append(
        f"load average (1 min) at end {os.getloadavg()[0]:.2f}; speed reference "
        f"{speed_reference():.1f} ms"
    )
    shutil.rmtree(cwd)
    emit(lines, args.out)


def speed_reference(repeats: int = 5) -> float:
    """Milliseconds (the best of ``repeats``) for a fixed piece of the Python work the reads
    do: 20 000 dicts made, encoded and decoded as JSON, sorted. This machine's speed drifts
    by a third over minutes (other engineers' jobs share its cores): the figure beside the
    timings says how fast it ran while they were taken."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        rows = [{"case": f"hf/c{i}", "mode": "eager", "ms": i * 1.5, "n": i} for i in range(20_000)]
        json.loads(json.dumps(rows))
        sorted(rows, key=lambda r: (-r["ms"], r["case"]))
        best = min(best, time.perf_counter() - start)
    return best * 1000


def _once(args: list[str], cwd: str) -> list:
    wall, rss, out_lines, code, cpu = run_command(args, cwd)
    return [wall, wall, rss, out_lines, code, os.getloadavg()[0], cpu]


if __name__ == "__main__":
    main()
