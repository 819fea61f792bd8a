"""Comparing two 100 000-result runs on PostgreSQL: the dashboard's first rows of each list and
the whole comparison (``views.compare.compare_runs``), as on SQLite in web_pages.py.

Starts a throwaway PostgreSQL server with the tests' script (Debian's postgresql package, the
server on the same cores as this process), fills two runs of ``tests.synthetic_kb``'s results
(50 000 cases x 2 modes, one on cuda, one on cpu: a cross-device comparison), and times each
form three times, before and after ``VACUUM ANALYZE`` (index-only scans need the visibility
map that a vacuum writes).

    python benchmarks/compare_pg.py --out docs/results/compare_pg.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import psycopg  # noqa: E402
from _report import emit  # noqa: E402
from tests import pg  # noqa: E402
from tests.synthetic_kb import case_ids, fill  # noqa: E402

from torchport.records import open_store  # noqa: E402
from torchport.views.compare import compare_runs  # noqa: E402


def timed(store, run_a: str, run_b: str, limit: int | None) -> str:
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        compare_runs(store, run_a, run_b, limit=limit)
        samples.append(1e3 * (time.perf_counter() - start))
    what = "every row" if limit is None else f"the first {limit} rows of each list"
    return (
        f"compare_runs, {what}: median {statistics.median(samples):.0f} ms, "
        f"max {max(samples):.0f} ms (load {os.getloadavg()[0]:.1f})"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=50_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    lines = [
        f"$ python benchmarks/compare_pg.py {' '.join(argv or sys.argv[1:])}",
        f"{os.cpu_count()} logical cores shared by the server and this process; load average "
        f"(1 min) at start {os.getloadavg()[0]:.2f}",
    ]
    url, folder = pg.start_server()
    try:
        with pg.admin(url) as conn:
            conn.execute("CREATE DATABASE bench")
        db = pg.with_database(url, "bench")
        start = time.perf_counter()
        runs = fill(db, 2, case_ids(args.cases), 5000)
        lines.append(
            f"filled 2 runs ({', '.join(runs)}) of {2 * args.cases} results each in "
            f"{time.perf_counter() - start:.0f} s"
        )
        for vacuumed in (False, True):
            if vacuumed:
                with psycopg.connect(db, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE results")
                lines.append("after VACUUM ANALYZE results:")
            with open_store(db, write=False) as store:
                lines += [timed(store, runs[1], runs[0], limit) for limit in (30, None)]
    finally:
        pg.stop_server(folder)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
