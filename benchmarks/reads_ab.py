"""A/B, interleaved: the reads of issue 31 with another commit's code (A, e.g. ``main``) and
with this tree's (B), each command run as a user runs it, alternately, on one knowledge base,
with what each wrote compared. On a shared machine the load makes wall time mostly waiting:
the CPU time of the process (user + system, from /usr/bin/time -v; a PostgreSQL server's own
is not in it) and the alternation are what compare the two.

    python benchmarks/reads_ab.py --ref main --db /work/kb1m/kb.db --out docs/results/reads_ab.txt

A's code is ``git archive REF src`` put first on the module path of this tree's Python, so
both sides share the installed packages.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE]
from _report import emit, time_v  # noqa: E402

_WALL = re.compile(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)")


def run(args: list[str], cwd: str, src: str | None) -> tuple[float, float, int, bytes]:
    """(wall s, CPU s, peak RSS MB, stdout) of ``torchport ARGS``; ``src``: A's code first."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    proc = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, "-m", "torchport.interfaces.cli", *args],
        capture_output=True,
        cwd=cwd,
        env=env,
    )
    err = proc.stderr.decode(errors="replace")
    if proc.returncode not in (0, 1):  # 1: a gate that found regressions
        raise SystemExit(f"torchport {' '.join(args)} failed:\n{err[-2000:]}")
    hours, minutes, seconds = _WALL.search(err).groups()
    wall = int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
    cpu, rss = time_v(err)
    return wall, cpu, rss // 2**20, proc.stdout


def body(path: str) -> bytes:
    """A written file without an export's header line (it carries the export time)."""
    with open(path, "rb") as f:
        data = f.read()
    return data.split(b"\n", 1)[1] if b'"kind":"header"' in data.split(b"\n", 1)[0] else data


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ref", default="main", help="A: the commit whose code is compared")
    parser.add_argument("--db", required=True)
    parser.add_argument("--runs", nargs=2, default=("cuda-2.12", "cuda-2.13"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    run_a, run_b = args.runs
    work = tempfile.mkdtemp(prefix="reads-ab-")
    src_a = os.path.join(work, "a")
    os.makedirs(src_a)
    archive = subprocess.run(
        ["git", "-C", ROOT, "archive", args.ref, "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", src_a], input=archive.stdout, check=True)
    src_a = os.path.join(src_a, "src")
    found = subprocess.run(
        [sys.executable, "-c", "import torchport; print(torchport.__file__)"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": src_a},
        check=True,
    ).stdout
    assert found.startswith(src_a), f"A's code is not the one imported: {found}"
    # Both sides' bytecode, as an installed package has it (where PYTHONDONTWRITEBYTECODE
    # is set, as on the machine this ran on, an editable tree compiles each module it
    # imports on every command: 0.05-0.1 s of each command's CPU, and a side with fewer
    # compiled files would read slower for nothing its code does).
    for tree in (src_a, os.path.join(ROOT, "src")):
        compileall.compile_dir(tree, quiet=1)
    sha = [
        subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", ref],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for ref in (args.ref, "HEAD")
    ]
    db = ["--db", args.db]
    baseline = os.path.join(work, "expected.json")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torchport.interfaces.cli",
            "baseline",
            "save",
            run_b,
            "-o",
            baseline,
            *db,
        ],
        check=True,
        capture_output=True,
        cwd=work,
    )
    commands = [
        ("baseline save", ["baseline", "save", run_b, "-o", "{out}.json", *db], "{out}.json"),
        ("gate (own baseline)", ["gate", run_b, "--baseline", baseline, *db], None),
        ("gate --json (another run)", ["gate", run_a, "--baseline", baseline, "--json", *db], None),
        ("export", ["export", run_b, "-o", "{out}.jsonl", *db], "{out}.jsonl"),
        ("compare --json", ["compare", run_a, run_b, "--json", *db], None),
        ("compare", ["compare", run_a, run_b, *db], None),
    ]
    lines = [
        f"$ python benchmarks/reads_ab.py {' '.join(argv or sys.argv[1:])}",
        f"A: {args.ref} ({sha[0]}), B: this tree (HEAD {sha[1]} and its changes); "
        f"{os.cpu_count()} logical cores, shared; load average (1 min) at start "
        f"{os.getloadavg()[0]:.2f}",
        "",
        "| command | A CPU s | B CPU s | B / A CPU | A wall s | B wall s | A / B peak RSS MB "
        "| same output | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, argv_, written in commands:
        samples: dict[str, list] = {"a": [], "b": []}
        outputs: dict[str, bytes] = {}
        loads = []
        for rnd in range(args.rounds + 1):  # the first round warms the file's pages
            for side, src in (("a", src_a), ("b", None)):
                out = os.path.join(work, side)
                wall, cpu, rss, stdout = run([a.format(out=out) for a in argv_], work, src)
                if rnd:
                    samples[side].append((wall, cpu, rss))
                    loads.append(os.getloadavg()[0])
                outputs[side] = body(written.format(out=out)) if written else stdout
        a, b = ([statistics.median(x[k] for x in samples[s]) for k in range(2)] for s in "ab")
        rss = [max(x[2] for x in samples[s]) for s in "ab"]
        same = "yes" if outputs["a"] == outputs["b"] else "NO"
        print(f"  {label}: A {a[1]:.2f} s CPU, B {b[1]:.2f} s CPU", file=sys.stderr, flush=True)
        lines.append(
            f"| `{label}` | {a[1]:.2f} | {b[1]:.2f} | {b[1] / a[1]:.2f} | {a[0]:.2f} | "
            f"{b[0]:.2f} | {rss[0]} / {rss[1]} | {same} | {statistics.median(loads):.1f} |"
        )
    lines += [
        "",
        f"medians of {args.rounds} rounds after one, each round A then B; CPU s: the process's "
        "user + system time; same output: what B wrote (stdout, or the file without an "
        "export's header) is byte for byte A's",
        f"load average (1 min) at end {os.getloadavg()[0]:.2f}",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
