"""The reads issue 31 added, timed on a knowledge base made by benchmarks/kb_scale.py: the
headline counts of every run (the run list), one run's medians (``show``, the run page),
``placement_summary`` of a comparison, a host-op search, and the commands around them.

    python benchmarks/headline_reads.py --db /tmp/kb_scale.db --out docs/results/headline_reads.txt

Each figure is the median and max of ``--repeats`` timings after one warm-up, with the load
average beside it (the machine is shared): read them against the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from torchport.records import open_store
from torchport.views.compare_placement import placement_summary
from torchport.views.headline import run_headlines
from torchport.views.search_more import more_hits

TORCHPORT = os.path.join(os.path.dirname(sys.executable), "torchport")


def timed(fn, repeats: int) -> tuple[float, float]:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), max(times)


def command(args: list[str], cwd: str) -> None:
    proc = subprocess.run([TORCHPORT, *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"torchport {' '.join(args)} failed: {proc.stderr[-500:]}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    lines = [
        f"$ python benchmarks/headline_reads.py {' '.join(argv or sys.argv[1:])}",
        f"{os.cpu_count()} logical cores, shared with other engineers' jobs; load average "
        f"(1 min) at start {os.getloadavg()[0]:.2f}",
    ]
    with open_store(args.db, write=False) as store:
        runs = store.list_runs()
        total = store.count_results()
        big = max(runs, key=lambda r: sum(r["counts"].values()))
        other = next((r for r in runs if r["id"] != big["id"]), big)
        lines.append(
            f"knowledge base: {total} results in {len(runs)} runs, schema "
            f"v{store.schema_version()}; the largest run {big['id']} has "
            f"{sum(big['counts'].values())} results"
        )
        reads = [
            ("headline counts of every run (store.headline_counts)", store.headline_counts),
            (
                "every run's headline (views.headline.run_headlines)",
                lambda: run_headlines(store, runs),
            ),
            (
                f"medians of {big['id']} (store.headline_figures)",
                lambda: store.headline_figures(big["id"]),
            ),
            (
                f"placement summary {other['id']} -> {big['id']}",
                lambda: placement_summary(store, other, big),
            ),
            (
                "host-op and label search 'cumsum' (views.search_more)",
                lambda: more_hits(store, "cumsum", 50),
            ),
        ]
        rows = []
        for label, fn in reads:
            median, worst = timed(fn, args.repeats)
            rows.append((label, median, worst, os.getloadavg()[0]))
    cwd = tempfile.mkdtemp(prefix="headline-reads-")
    db = ["--db", args.db]
    for label, cli in (
        ("`torchport runs`", ["runs", *db]),
        (f"`torchport show {big['id']}` (summary)", ["show", big["id"], *db]),
        ("`torchport search cumsum`", ["search", "cumsum", *db]),
    ):
        median, worst = timed(lambda cli=cli: command(cli, cwd), args.repeats)
        rows.append((label + ", whole process", median, worst, os.getloadavg()[0]))
    lines += ["", "| read | median s | max s | load |", "| --- | --- | --- | --- |"]
    lines += [f"| {label} | {m:.3f} | {w:.3f} | {load:.1f} |" for label, m, w, load in rows]
    lines.append(f"\nload average (1 min) at end {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
