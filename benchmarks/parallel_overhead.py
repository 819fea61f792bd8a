"""What the driver costs per task, and what --jobs and Ray buy, measured through torchport.api.

1. The single writer alone: api.run over an executor that answers every task at once (no
   worker), so each result costs only validation, the store commit and the callback: the most
   results/s one driver can record.
2. Driver overhead per task: the synthetic noop cases, serial. Per-task wall time in the steady
   state (between the first and last result, so worker start-up is excluded) minus the time the
   worker spent in the ladder's stages (the durations it recorded).
3. Throughput with a 50 ms case (synthetic busy50: 50 ms of CPU per task): serial, --jobs 2,
   and Ray on this one node with 2 actors, interleaved over rounds. Steady-state results/s and
   total wall time (start-up included) of each.
4. Row size: bytes per stored result for real rows (smoke cases with the perf probe, eager and
   compile), from the JSON the store keeps and from the database file's growth.

    python benchmarks/parallel_overhead.py --out docs/results/parallel_overhead.txt
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402

from torchport import api  # noqa: E402
from torchport.config import RunConfig  # noqa: E402
from torchport.kb import open_store  # noqa: E402
from torchport.records.result import Result  # noqa: E402
from torchport.runner.executors.protocol import Finished  # noqa: E402


def load() -> str:
    return "load {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


class InstantExecutor:
    """Answers each task at once with a pass: what is left is the driver's own work."""

    def __init__(self):
        self.queue = []

    def submit(self, task):
        self.queue.append(task)

    def next_result(self, timeout_s=None):
        if not self.queue:
            return None
        task = self.queue.pop()
        result = Result(
            case=task.case,
            mode=task.mode,
            status="pass",
            durations={"run_s": 0.001},
            metrics={"perf_median_ms": 1.0},
        )
        return Finished(task=task, result=result.to_dict(), environment={"torch": "bench"})

    def cancel(self):
        self.queue.clear()

    def close(self):
        pass


def timed_run(config: RunConfig, folder: str, executor=None) -> dict:
    """One api.run; the clock time of each result, and the ladder time each one recorded."""
    stamps, ladder_s, statuses = [], [], {}

    def on_result(result):
        stamps.append(time.perf_counter())
        ladder_s.append(sum(v for k, v in result.durations.items() if k.endswith("_s")))
        statuses[result.status] = statuses.get(result.status, 0) + 1

    path = os.path.join(folder, f"kb-{time.time_ns()}.db")
    load_before = load()
    with open_store(path, write=True) as store:
        started = time.perf_counter()
        outcome = api.run(
            config,
            store,
            executor=executor,
            on_result=on_result,
            command="benchmarks/parallel_overhead.py",
        )
        wall = time.perf_counter() - started
    assert outcome.state == "complete", outcome
    n = len(stamps)
    steady = (stamps[-1] - stamps[0]) / (n - 1) if n > 1 else float("nan")
    return {
        "n": n,
        "wall_s": wall,
        "steady_task_s": steady,
        "results_per_s": 1 / steady,
        "ladder_task_s": statistics.mean(ladder_s),
        "statuses": statuses,
        "load": load_before,
        "db": path,
    }


def writer_ceiling(folder: str, lines: list[str], repeats: int) -> None:
    config = RunConfig(
        suite="synthetic", cases=("noop_*",), modes=("eager", "compile"), device="cpu", probes=()
    )
    rates = [timed_run(config, folder, InstantExecutor())["results_per_s"] for _ in range(repeats)]
    lines.append(
        f"single writer, no worker (api.run + SQLite commit per result, 400 results, "
        f"median of {repeats}): {statistics.median(rates):.0f} results/s "
        f"(spread {min(rates):.0f}..{max(rates):.0f}); {load()}"
    )


def warm_references(folder: str, cases: tuple[str, ...]) -> None:
    """One untimed serial pass over ``cases``: each case's float64 reference is computed once
    per host (about 2 s in a clean child) and read from the cache after that, so no timed side
    pays it and the others do not."""
    config = RunConfig(suite="synthetic", cases=cases, modes=("eager",), device="cpu", probes=())
    timed_run(config, folder)


def driver_overhead(folder: str, lines: list[str]) -> None:
    warm_references(folder, ("noop_*",))
    for jobs in (1, 2):
        config = RunConfig(
            suite="synthetic",
            cases=("noop_*",),
            modes=("eager",),
            device="cpu",
            probes=(),
            jobs=jobs,
        )
        out = timed_run(config, folder)
        overhead_ms = (out["steady_task_s"] - out["ladder_task_s"] / jobs) * 1000
        lines.append(
            f"noop x {out['n']}, --jobs {jobs}: {out['steady_task_s'] * 1000:.1f} ms "
            f"per result in the steady state ({out['results_per_s']:.1f} results/s); "
            f"ladder stages {out['ladder_task_s'] * 1000:.1f} ms per task; overhead "
            f"per task {overhead_ms:.1f} ms; wall {out['wall_s']:.1f} s with start-up;"
            f" {out['statuses']}; {out['load']}"
        )


def throughput(folder: str, lines: list[str], rounds: int, cases: int, ray: bool) -> None:
    plan = tuple(f"busy50_{i:03d}" for i in range(cases))
    sides = [("serial", {"jobs": 1}), ("--jobs 2", {"jobs": 2})]
    if ray:
        sides.append(("ray, 1 node, 2 actors", {"jobs": 2, "executor": "ray"}))
    found: dict[str, list[dict]] = {name: [] for name, _ in sides}
    warm_references(folder, plan)
    for _ in range(rounds):  # interleaved: each round runs every side once
        for name, extra in sides:
            config = RunConfig(
                suite="synthetic", cases=plan, modes=("eager",), device="cpu", probes=(), **extra
            )
            started = time.perf_counter()
            executor = api.make_executor(config)  # Ray's start-up is timed with the run
            out = timed_run(config, folder, executor)
            out["wall_s"] = time.perf_counter() - started
            found[name].append(out)
    serial = statistics.median(o["results_per_s"] for o in found["serial"])
    for name, outs in found.items():
        rate = statistics.median(o["results_per_s"] for o in outs)
        lines.append(
            f"busy50 x {cases}, {name}: {rate:.2f} results/s steady "
            f"({rate / serial:.2f}x serial); per round: "
            + "; ".join(
                f"{o['results_per_s']:.2f}/s, ladder "
                f"{o['ladder_task_s'] * 1000:.0f} ms/task, wall "
                f"{o['wall_s']:.1f} s, {o['load']}"
                for o in outs
            )
        )


def row_sizes(folder: str, lines: list[str], copies: int) -> None:
    """Real rows (smoke cases, eager and compile, with the perf probe), then the same rows
    stored ``copies`` times over into a second database: its growth per result is what a
    result costs once the fixed pages (schema, indexes, full-text tables) are paid."""
    config = RunConfig(
        suite="smoke",
        cases=("mlp", "convnet", "llama", "gpt2"),
        modes=("eager", "compile"),
        device="cpu",
        probes=("perf",),
        perf_budget_s=0.3,
    )
    path = os.path.join(folder, "rows.db")
    with open_store(path, write=True) as store:
        outcome = api.run(config, store, command="benchmarks/parallel_overhead.py")
        results = store.results(run_id=outcome.run_id)
        run = store.get_run(outcome.run_id)
    conn = sqlite3.connect(path)
    stored = conn.execute(
        "SELECT AVG(length(metrics) + length(findings) + length(durations) + "
        "length(artifacts) + coalesce(length(error_message), 0) + "
        "coalesce(length(traceback), 0) + length(case_id)) FROM results"
    ).fetchone()[0]
    conn.close()
    grown_path = os.path.join(folder, "grown.db")
    with open_store(grown_path, write=True) as store:
        store.create_run(
            run_id="base",
            command="rows",
            suite="smoke",
            device="cpu",
            config=run["config"],
            plan=[],
            labels={},
        )
        before = os.path.getsize(grown_path)
        for i in range(copies):
            run_id = f"copy{i}"
            store.create_run(
                run_id=run_id,
                command="rows",
                suite="smoke",
                device="cpu",
                config=run["config"],
                plan=[],
                labels={},
            )
            for result in results:
                store.add_results(run_id, [result])
            store.update_run(run_id, state="complete")
    n = copies * len(results)
    per_result = (os.path.getsize(grown_path) - before) / n
    lines.append(
        f"row size: {len(results)} real smoke results (eager+compile, perf probe; run "
        f"{outcome.state}): {stored:.0f} bytes of stored values per result; the same "
        f"rows stored {copies} times ({n} results, a run per copy): the database grew "
        f"{per_result:.0f} bytes per result (row, op table, indexes, full-text index)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy-cases", type=int, default=60)
    parser.add_argument("--writer-repeats", type=int, default=5)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument(
        "--parts",
        default="writer,overhead,throughput,rows",
        help="comma-separated: writer, overhead, throughput, rows",
    )
    parser.add_argument("--row-copies", type=int, default=250)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = os.path.abspath(args.out) if args.out else None
    cores = len(os.sched_getaffinity(0))
    lines = [
        f"$ python benchmarks/{os.path.basename(__file__)} {' '.join(sys.argv[1:])}",
        f"{cores} usable cores, {os.cpu_count()} logical; the machine is shared with "
        f"other engineers' test runs: each line carries the 1/5/15-min load average "
        f"taken as it started.",
    ]
    with tempfile.TemporaryDirectory(prefix="torchport-bench-") as folder:
        os.chdir(folder)  # artifacts and Ray's working folder stay out of the repository
        parts = set(args.parts.split(","))
        if "writer" in parts:
            writer_ceiling(folder, lines, args.writer_repeats)
        if "overhead" in parts:
            driver_overhead(folder, lines)
        if "throughput" in parts:
            throughput(folder, lines, args.rounds, args.busy_cases, ray=not args.no_ray)
        if "rows" in parts:
            row_sizes(folder, lines, args.row_copies)
    emit(lines, out)


if __name__ == "__main__":
    main()
