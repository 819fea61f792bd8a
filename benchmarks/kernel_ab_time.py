"""Wall time of the kernel A/B of one replacement in reduced llama, through the CLI.

Runs ``torchport run --suite kernels --cases <case> --device cpu --modes eager`` into a fresh
knowledge base (a fresh worker: imports, the model build, opcheck, gradcheck, samples, the
whole-model A/B and the timings all count) and reports the wall time, the result's stage
durations and its verdict. Target: under 3 minutes on 2 cores.

    python benchmarks/kernel_ab_time.py --out docs/results/kernel_ab_time.txt
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="rms_norm")
    parser.add_argument("--modes", default="eager")
    parser.add_argument("--target-s", type=float, default=180.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cli = [sys.executable, "-m", "torchport.interfaces.cli"]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        db = os.path.join(folder, "kb.sqlite")
        start = time.perf_counter()
        subprocess.run(
            [
                *cli,
                "run",
                "--suite",
                "kernels",
                "--cases",
                args.case,
                "--device",
                "cpu",
                "--modes",
                args.modes,
                "--db",
                db,
                "--json",
            ],
            check=True,
            capture_output=True,
        )
        wall_s = time.perf_counter() - start
        shown = subprocess.run(
            [*cli, "show", "--db", db, "--json"], check=True, capture_output=True
        )
    lines = [
        "$ python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        f"load average before {load_before:.2f}, after {os.getloadavg()[0]:.2f} "
        f"({os.cpu_count()} CPUs, shared with other jobs)",
    ]
    for r in json.loads(shown.stdout)["results"]:
        kernel = r["findings"]["kernel"]
        lines.append(f"{r['case']} [{r['mode']}]: {r['status']}, {kernel.get('verdict')}")
        lines.append("  " + (kernel.get("reason") or ""))
        lines.append(
            "  stages (s): "
            + ", ".join(f"{k.removesuffix('_s')} {v:.1f}" for k, v in r["durations"].items())
        )
    verdict = "within" if wall_s <= args.target_s else "OUTSIDE"
    lines.append(
        f"wall time of the whole run {wall_s:.1f} s: {verdict} the {args.target_s:.0f} s target"
    )
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
