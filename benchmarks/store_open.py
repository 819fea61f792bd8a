"""What opening the knowledge base costs as it grows: a write open (identity check, PRAGMA
quick_check over every page, migration check) and a read open plus ``list_runs`` and one run's
results (what ``show`` does before rendering).

The write open's integrity check is what makes ``torchport run`` refuse a damaged file before it
records anything; this measures its price.

    python benchmarks/store_open.py --results 2000,20000,100000 --out docs/results/store_open.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402

from torchport.kb import open_store  # noqa: E402

CASES_PER_RUN = 200


def fill(path: str, n_results: int) -> None:
    """Runs of CASES_PER_RUN cases x 2 modes, results the size of a real sweep's."""
    findings = {
        "tags": ["dense"],
        "perf": {"notes": ["x" * 80], "step_kind": "training"},
        "fallback_ops": {"aten.cumsum.default": 2},
        "ops": [
            {"op": f"aten.op{i}.default", "device": "cpu", "count": 3, "fallback": i == 0}
            for i in range(20)
        ],
    }
    metrics = {f"perf_m{i}_ms": float(i) for i in range(15)}
    with open_store(path, write=True) as store:
        done = 0
        while done < n_results:
            run_id = f"run{done}"
            store.create_run(
                run_id=run_id,
                command="fill",
                suite="hf",
                device="cpu",
                config={"modes": ["eager", "compile"]},
                plan=[],
                labels={},
            )
            for i in range(min(CASES_PER_RUN * 2, n_results - done)):
                store.add_results(
                    run_id,
                    [
                        {
                            "case": f"hf/case{i // 2}",
                            "mode": ("eager", "compile")[i % 2],
                            "status": "pass",
                            "metrics": metrics,
                            "findings": findings,
                        }
                    ],
                )
            done += min(CASES_PER_RUN * 2, n_results - done)
            store.update_run(run_id, state="complete")


def timed(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", default="2000,20000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    lines = [
        f"$ python benchmarks/store_open.py {' '.join(argv or sys.argv[1:])}",
        f"median of {args.repeats} opens each; {os.cpu_count()} logical cores, "
        f"1-min load average {os.getloadavg()[0]:.2f}",
        f"{'results':>8} {'file MB':>8} {'write open ms':>14} {'read open ms':>13} "
        f"{'list_runs + one run ms':>23}",
    ]
    for n in (int(v) for v in args.results.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "kb.db")
            fill(path, n)

            def write_open(path=path):
                open_store(path, write=True).close()

            def read_open(path=path):
                open_store(path, write=False).close()

            def browse(path=path):
                with open_store(path, write=False) as store:
                    runs = store.runs()
                    store.results(run_id=runs[0]["id"])

            megabytes = os.path.getsize(path) / 2**20
            lines.append(
                f"{n:>8} {megabytes:>8.1f} {timed(write_open, args.repeats):>14.1f} "
                f"{timed(read_open, args.repeats):>13.1f} "
                f"{timed(browse, args.repeats):>23.1f}"
            )
    emit(lines, args.out)


if __name__ == "__main__":
    main()
