"""What the compile probe's cold/warm measurement adds to a sweep's time.

Times two sweeps of the same suite in compile mode, a plain one and the same with the compile
probe added, each a separate ``torchport run`` with its own database, interleaved when repeated.
``--base-probes`` sets the plain sweep's probes: ``none`` (the ladder alone: build, eager step,
compile, parity) or ``default`` (what ``torchport run`` does without ``--probes``: on the CPU,
the perf probe); the other sweep adds ``compile`` to them. Prints each sweep's wall
time, the ratio, and per case the cold first compiled step (measured by the ladder in a fresh
worker with empty caches, or by a cold child) and where the probe's own time went.

    .venv/bin/python benchmarks/compile_overhead.py [--suite smoke] [--device cpu]
        [--repeats 1] [--cache default|fresh] [--base-probes none|default|LIST]
        [--out docs/results/compile_overhead_cpu.txt]

``--cache default`` leaves the machine's own compile cache as it is (a plain sweep then
compiles against whatever earlier runs left there); ``--cache fresh`` gives every sweep a new
empty TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR, as on the first sweep after a new release.
With the probe, each compile task always starts from empty caches (that is what it measures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from torchport.timing import clock

TARGET_RATIO = 2.0


def sweep(suite: str, device: str, probes: str, cache: str, extra: list[str]) -> dict:
    """One ``torchport run`` in its own folder and database: wall seconds and its results.
    ``probes`` "default" runs without ``--probes`` (the run's own default probes)."""
    work = tempfile.mkdtemp(prefix="overhead-")
    env = dict(os.environ)
    if cache == "fresh":
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "inductor")
        env["TRITON_CACHE_DIR"] = os.path.join(work, "triton")
    cmd = [
        sys.executable,
        "-m",
        "torchport.interfaces.cli",
        "run",
        "--suite",
        suite,
        "--device",
        device,
        "--modes",
        "compile",
        "--db",
        os.path.join(work, "kb.db"),
        "--json",
        *([] if probes == "default" else ["--probes", probes]),
        *extra,
    ]
    start = clock()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work)
        wall_s = clock() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return {"wall_s": wall_s, "results": json.loads(proc.stdout)["results"]}


def case_lines(results: list[dict]) -> list[str]:
    lines = []
    for r in results:
        c = (r.get("findings") or {}).get("compile") or {}
        cold, warm = c.get("cold") or {}, c.get("warm") or {}
        durations = r.get("durations") or {}
        where = (
            "in the ladder (fresh worker)"
            if cold.get("measured_by") == "ladder"
            else f"in a child of {_s(cold.get('elapsed_s'))}"
        )
        lines.append(
            f"  {r['case']:<16} {r['status']:<11} cold first compiled step "
            f"{_s(cold.get('first_step_s'))} {where}; probe {_s(durations.get('probe_compile_s'))}"
            f" = warm child {_s(warm.get('elapsed_s'))} (first compiled step "
            f"{_s(warm.get('first_step_s'))}, proven warm: {c.get('warm_proven', '-')})"
        )
    return lines


def _s(value) -> str:
    return f"{value:6.2f} s" if isinstance(value, (int, float)) else "     -  "


def _each(sweeps: list[dict]) -> str:
    return ", ".join(f"{s['wall_s']:.1f} s" for s in sweeps)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="smoke")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cache", choices=("default", "fresh"), default="default")
    parser.add_argument(
        "--base-probes",
        default="none",
        help="the plain sweep's --probes: none, default (no --probes) or a list",
    )
    parser.add_argument("--out", default=None, help="Also write the report to this file.")
    parser.add_argument("extra", nargs="*", help="More 'torchport run' options (after --).")
    args = parser.parse_args(argv)

    base = args.base_probes
    if base == "default":
        from torchport.api import resolve_probes

        with_compile = ",".join([*resolve_probes(args.device, None), "compile"])
    else:
        with_compile = "compile" if base == "none" else f"{base},compile"
    plain, probed = [], []
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits both sides
        plain.append(sweep(args.suite, args.device, base, args.cache, args.extra))
        probed.append(sweep(args.suite, args.device, with_compile, args.cache, args.extra))
    plain_s = statistics.median(s["wall_s"] for s in plain)
    probed_s = statistics.median(s["wall_s"] for s in probed)
    ratio = probed_s / plain_s
    lines = [
        " ".join(["python", "benchmarks/compile_overhead.py", *(argv or sys.argv[1:])]),
        f"suite {args.suite}, device {args.device}, modes compile, cache {args.cache}, "
        f"{args.repeats} repeat(s), {os.cpu_count()} logical cores",
        f"plain    --probes {base:<18} {plain_s:8.1f} s  (each: {_each(plain)})",
        f"with the probe: --probes {with_compile:<10} {probed_s:8.1f} s  (each: {_each(probed)})",
        f"ratio {ratio:.2f}x (target < {TARGET_RATIO:g}x: "
        f"{'met' if ratio < TARGET_RATIO else 'NOT met'})",
        "per case (last sweep with the probe):",
        *case_lines(probed[-1]["results"]),
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
