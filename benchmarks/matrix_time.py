"""How long ``torchport matrix`` takes (issue 34): a two-environment matrix (default
benchmarks/matrix_torch.toml: torch 2.12.1 and 2.13.0, the smoke suite on the CPU)

1. from empty caches: a new uv cache, no environments, no float64 references, a new
   knowledge base;
2. with the environments and references built: a new knowledge base (both runs made again);
3. a second invocation on the same knowledge base: everything reused.

    python benchmarks/matrix_time.py [--matrix FILE] [--work DIR] [--out FILE] [MATRIX_OPTIONS]

e.g. ``--cases smoke/mlp,smoke/convnet`` to time a reduced suite (say so beside the figure).

Writes the figures with the machine's load (``uptime``) before and after each step to
docs/results/matrix_time.txt (first line: the command that made it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


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
        ("2. environments and references built, new knowledge base", "kb2.db"),
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
        print("\n".join(lines[-4:]), flush=True)
    with open(os.path.join(args.work, "out", "release-note.md")) as f:
        lines += ["", "release note (step 3):", *("  " + line for line in f.read().splitlines())]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
