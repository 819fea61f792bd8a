"""The whole ``ops`` suite on one device, timed, with its counts kept under docs/results/.

Runs the installed ``torchport run --suite ops`` (one worker process reused across ops, the
supervisor's per-op deadline), then reads the run back with ``torchport show --json`` and
reports: wall and CPU time, machine load, results by status, skips by reason, samples, every
failing result with its message, the slowest ops, and the head of the compatibility table
(the whole table goes next to the report as CSV).

    .venv/bin/python benchmarks/ops_sweep.py --device simdev --out docs/results/ops_simdev.txt
    .venv/bin/python benchmarks/ops_sweep.py --device cpu --cases 'ops/a*' --out /tmp/x.txt
    .venv/bin/python benchmarks/ops_sweep.py --device simdev --depth 2 --jobs 2 \
        --target-min 30 --out docs/results/ops_simdev_depth2.txt     # issue 47's target

With the whole suite the run includes ``audit/dispatcher``, so the report carries the coverage
line ("X of Y backend-relevant aten overloads tested") and what was not run, by kind; the
overload-by-overload coverage goes next to it as ``*_coverage.csv``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit

SCRIPT = os.path.join(os.path.dirname(sys.executable), "torchport")
HEAD_ROWS = 40


def _run(args: list[str], log_path: str) -> tuple[int, float, float]:
    """(exit code, wall s, CPU s of the children: supervisor + workers)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(log_path, "w") as log:
        code = subprocess.call([SCRIPT, *args], stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return code, wall, cpu


def _show(run_id: str, db: str, *extra: str) -> str:
    return subprocess.run(
        [SCRIPT, "show", run_id, "--db", db, *extra], capture_output=True, text=True, check=True
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True)
    parser.add_argument("--cases", default=None, help="case globs (default: the whole suite)")
    parser.add_argument("--timeout", type=float, default=300.0, help="per-op deadline, s")
    parser.add_argument("--db", default=None, help="knowledge base (default: a temp file)")
    parser.add_argument("--out", default=None, help="report path (CSV next to it)")
    parser.add_argument("--depth", type=int, default=None, help="torchport run --depth")
    parser.add_argument("--jobs", type=int, default=None, help="torchport run --jobs")
    parser.add_argument(
        "--target-min", type=float, default=None, help="say whether the wall time met this"
    )
    parser.add_argument(
        "--report-run",
        default=None,
        metavar="RUN",
        help="report a finished run of --db instead of running one (its wall time from the "
        "run's recorded start and finish; CPU time not measured)",
    )
    args = parser.parse_args()
    if args.report_run and not args.db:
        parser.error("--report-run needs --db, the knowledge base holding the run")
    folder = tempfile.mkdtemp(prefix="ops-sweep-")
    db = args.db or os.path.join(folder, "ops.db")
    run_args = [
        "run",
        "--suite",
        "ops",
        "--device",
        args.device,
        "--timeout",
        f"{args.timeout:g}",
        "--db",
        db,
    ]
    if args.cases:
        run_args += ["--cases", args.cases]
    if args.depth is not None:
        run_args += ["--depth", str(args.depth)]
    if args.jobs is not None:
        run_args += ["--jobs", str(args.jobs)]
    started, load_before = datetime.now(timezone.utc), os.getloadavg()
    if args.report_run:
        run_id, code, cpu = args.report_run, 0, None
    else:
        code, wall, cpu = _run(run_args, os.path.join(folder, "run.log"))
        run_id = json.loads(
            subprocess.run(
                [SCRIPT, "runs", "--db", db, "--json"], capture_output=True, text=True, check=True
            ).stdout
        )[0]["id"]
    load_after = os.getloadavg()
    shown = json.loads(_show(run_id, db, "--json", "--all"))  # every result, past the summary
    results, view = shown["results"], shown["views"]["ops"]
    if args.report_run:
        recorded = shown["run"]
        run_args = recorded["command"].split()[1:]
        started = datetime.fromisoformat(recorded["started_at"])
        wall = (datetime.fromisoformat(recorded["finished_at"]) - started).total_seconds()
    cpu_text = (
        f"CPU {cpu:.0f} s (supervisor + workers)"
        if cpu is not None
        else "CPU not measured (--report-run: the run's recorded start and finish)"
    )
    load_text = (
        f"load average at report time {load_after[0]:.1f} (not the run's: --report-run)"
        if args.report_run
        else f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} (other jobs "
        "shared the machine when above ~2)"
    )
    header = (
        f"wall {wall:.0f} s ({wall / 60:.1f} min); {cpu_text};"
        f" {os.cpu_count()} cores ({platform.processor() or platform.machine()}); {load_text}"
    )
    lines = [
        f"$ torchport {' '.join(run_args)}",
        f"(via: {' '.join([sys.executable, *sys.argv])})",
        f"started {started.isoformat(timespec='seconds')}, exit code {code}, run {run_id} "
        + shown["run"]["state"],
        header,
        f"torch {shown['environment'].get('torch')}, python {platform.python_version()}",
        "",
    ]
    if args.target_min is not None:
        met = "met" if wall <= args.target_min * 60 else "NOT met"
        lines += [f"target: the run within {args.target_min:g} min: {met}", ""]
    lines += [view["notes"][0], ""] + [f"  {n}" for n in view["notes"][1:-2]] + [""]
    status = Counter(r["status"] for r in results)
    lines.append("results by status: " + ", ".join(f"{s} {n}" for s, n in status.most_common()))
    failing = [r for r in results if r["status"] not in ("pass", "skip")]
    lines.append(f"failing results ({len(failing)}):")
    for r in failing:
        message = ((r.get("error") or {}).get("message") or "").splitlines()
        lines.append(f"  {r['case']:<55} {r['status']:<14} {(message or [''])[0][:200]}")
    timed = sorted(
        (
            (
                sum(
                    v
                    for k, v in (r.get("durations") or {}).items()
                    if k.endswith("_s") and k != "elapsed_s"
                ),
                r["case"],
            )
            for r in results
        ),
        reverse=True,
    )[:15]
    lines.append(
        "slowest results (build + run seconds): "
        + ", ".join(f"{case} {s:.1f}" for s, case in timed)
    )
    lines += [
        "",
        (
            f"compatibility table, first {HEAD_ROWS} of {len(view['rows'])} rows "
            f"(columns: {', '.join(c['name'] for c in view['columns'])}):"
        ),
    ]
    for row in view["rows"][:HEAD_ROWS]:
        lines.append("  " + " | ".join("-" if c is None else str(c) for c in row))
    if args.out:
        csv_path = os.path.splitext(args.out)[0] + ".csv"
        with open(csv_path, "w") as f:
            f.write(_show(run_id, db, "--csv", "ops"))
        lines.append(f"whole table: {os.path.basename(csv_path)}")
        extra = {"ops-not-run": None, "ops-coverage": None}
        for name in extra:
            try:
                extra[name] = _show(run_id, db, "--csv", name)
            except subprocess.CalledProcessError:  # no such view in this run (no audit)
                continue
        if extra["ops-coverage"]:
            coverage_path = os.path.splitext(args.out)[0] + "_coverage.csv"
            with open(coverage_path, "w") as f:
                f.write(extra["ops-coverage"])
            lines.append(f"every overload's coverage: {os.path.basename(coverage_path)}")
        if extra["ops-not-run"]:
            lines += ["", "not run, by kind (torchport show RUN --csv ops-not-run):"]
            lines += ["  " + row for row in extra["ops-not-run"].splitlines()]
    emit(lines, args.out)
    if not args.db:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
