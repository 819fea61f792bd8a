"""How long ``torchport matrix`` takes (issue 34): a two-environment matrix (default
benchmarks/matrix_torch.toml: torch 2.12.1 and 2.13.0, the smoke suite on the CPU)

1. from empty caches: a new uv cache, no environments, no float64 references, a new
   knowledge base;
2. with the environments and references built (and each environment's compile cache, kept
   in it, warm from step 1): a new knowledge base (both runs made again);
3. a second invocation on the same knowledge base: everything reused.

    python benchmarks/matrix_time.py [--matrix FILE] [--work DIR] [--out FILE] [MATRIX_OPTIONS]

e.g. ``--cases smoke/mlp,smoke/convnet`` to time a reduced suite (say so beside the figure).

Writes the figures with the machine's load (``uptime``) before and after each step to
docs/results/matrix_time.txt (first line: the command that made it), and where each step's
time went: each environment's build (uv's steps: venv, packages, torchport, lock), each run
(started to finished, as recorded), the float64 references it added, and the rest (the
matrix's own work: comparisons, note, gate).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def breakdown(out: str, wall: float) -> list[str]:
    """Where a step's time went, from the matrix's release-note.json and env.json files."""
    try:
        with open(os.path.join(out, "release-note.json")) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        return [f"  no breakdown: {exc}"]
    lines, accounted = [], 0.0
    built = set()
    for env in data.get("environments", []):
        if env["name"] not in built and env.get("env_build_s") is not None:
            built.add(env["name"])
            accounted += env["env_build_s"]
            steps = ""
            try:
                with open(os.path.join(env["path"], "env.json")) as f:
                    done = json.load(f).get("steps_s") or {}
                if not env.get("env_reused"):
                    steps = " (" + ", ".join(f"{k} {v:.0f} s" for k, v in done.items()) + ")"
            except (OSError, ValueError, TypeError):
                pass
            state = "reused" if env.get("env_reused") else "built"
            lines.append(
                f"  {env['name']}: environment {state} in {env['env_build_s']:.0f} s{steps}"
            )
        if env.get("run_id"):
            run_s = env.get("run_wall_s")
            state = "reused" if env.get("run_reused") else "made"
            if not env.get("run_reused") and run_s is not None:
                accounted += run_s
            refs = env.get("references_added")
            lines.append(
                f"  {env['name']}: run {env.get('run_name')} {state}"
                + (f", {run_s:.0f} s as recorded" if run_s is not None else "")
                + (f", {refs} float64 references computed" if refs is not None else "")
            )
    lines.append(
        f"  the rest (the matrix's own work, start-up, comparisons): {wall - accounted:.0f} s"
    )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    default = os.path.join(ROOT, "benchmarks/matrix_torch.toml")
    parser.add_argument("--matrix", default=default)
    parser.add_argument("--work", default=os.path.expanduser("~/.cache/torchport/matrix-time"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs/results/matrix_time.txt"))
    args, extra = parser.parse_known_args()  # the rest: more 'torchport matrix' options
    torchport = os.path.join(os.path.dirname(sys.executable), "torchport")
    if os.path.exists(args.work):
        shutil.rmtree(args.work)
    os.makedirs(args.work)
    env = dict(
        os.environ,
        UV_CACHE_DIR=os.path.join(args.work, "uv-cache"),
        TORCHPORT_REFERENCE_CACHE=os.path.join(args.work, "references"),
    )
    lines = [
        "+ python benchmarks/matrix_time.py " + " ".join(sys.argv[1:]),
        f"matrix file: {os.path.relpath(args.matrix, ROOT)}",
    ]
    steps = (
        ("1. empty caches (uv cache, environments, references, knowledge base)", "kb1.db"),
        (
            "2. environments, references and each environment's compile cache built, new "
            "knowledge base",
            "kb2.db",
        ),
        ("3. second invocation, same knowledge base: everything reused", "kb2.db"),
    )
    for title, db in steps:
        cmd = [
            torchport, "matrix", args.matrix,
            "--envs-dir", os.path.join(args.work, "envs"),
            "--db", os.path.join(args.work, db),
            "--out", os.path.join(args.work, "out"),
            *extra,
        ]  # fmt: skip
        note = os.path.join(args.work, "out", "release-note.json")
        if os.path.exists(note):  # the breakdown reads this step's, never the last one's
            os.remove(note)
        before = load()
        start = time.perf_counter()
        with open(os.path.join(args.work, f"log-{db}-{steps.index((title, db))}.txt"), "w") as log:
            done = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
        lines += [
            "",
            title,
            f"  wall {wall:.0f} s ({wall / 60:.1f} min), exit code {done.returncode}",
            f"  load before: {before}",
            f"  load after:  {load()}",
        ]
        first = len(lines) - 4
        lines += breakdown(os.path.join(args.work, "out"), wall)
        print("\n".join(lines[first:]), flush=True)
        write(args.out, lines)  # after every step: a stopped measurement keeps what it has
    with open(os.path.join(args.work, "out", "release-note.md")) as f:
        lines += ["", "release note (step 3):", *("  " + line for line in f.read().splitlines())]
    write(args.out, lines)
    return 0


def write(path: str, lines: list[str]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
