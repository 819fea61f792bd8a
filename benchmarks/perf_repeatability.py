"""Repeatability of torchport's perf figures: the same case, five separate runs, on the CPU.

Each repeat is a full torchport run (a fresh worker process, its own warm-up and compile)
through the library; the spread is (max - min) / median of the five perf_median_ms figures.
Target: within 5%.

    python benchmarks/perf_repeatability.py --cases smoke/mlp,hf/llama \
        --out docs/results/perf_repeatability.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402


def host_speed_ms() -> float:
    """Median time of a fixed single-thread matmul in this process: how fast the shared
    machine is right now, apart from torchport (its spread bounds what any tool can show)."""
    import torch

    from torchport.timing import StepTimer, Summary, sample_interleaved

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    a = torch.randn(512, 512)  # ~3 ms: as long as a small step, so preemption shows too
    try:
        samples = sample_interleaved({"mm": lambda: a @ a}, StepTimer(), budget_s=0.5)
    finally:
        torch.set_num_threads(threads)
    return Summary.of(samples["mm"]).median_s * 1e3


def one_run(store, config) -> dict[tuple[str, str], dict]:
    from torchport import api

    run_id = api.run(config, store, command="perf_repeatability").run_id
    return {(r["case"], r["mode"]): r for r in store.results(run_id=run_id)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="smoke")
    parser.add_argument("--cases", default="smoke/mlp,hf/llama")
    parser.add_argument("--modes", default="eager,compile")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=2.0, help="perf budget per side")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="OMP_NUM_THREADS for the workers (default: torch's own choice)",
    )
    parser.add_argument("--target", type=float, default=0.05)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from torchport.config import RunConfig
    from torchport.kb import open_store

    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # inherited by the workers
    config = RunConfig(
        suite=args.suite,
        cases=tuple(args.cases.split(",")),
        modes=tuple(args.modes.split(",")),
        device=args.device,
        probes=("perf",),
        perf_budget_s=args.budget_s,
    )
    folder = tempfile.mkdtemp(prefix="torchport-repeat-")
    store = open_store(os.path.join(folder, "kb.db"), write=True)
    medians: dict[tuple[str, str], list[float]] = {}
    loads, host_ms = [], []
    for repeat in range(args.repeats):
        loads.append(os.getloadavg()[0])
        host_ms.append(host_speed_ms())
        for key, result in one_run(store, config).items():
            value = (result.get("metrics") or {}).get("perf_median_ms")
            medians.setdefault(key, []).append(value)
        print(
            f"repeat {repeat + 1}/{args.repeats}: "
            + ", ".join(
                f"{c} [{m}] {v[-1]:.4g} ms" if v[-1] is not None else f"{c} [{m}] -"
                for (c, m), v in medians.items()
            ),
            flush=True,
        )
    lines = [
        "$ python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        f"{args.repeats} separate runs on {args.device}, perf budget {args.budget_s} s per "
        f"side, workers' OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
        f"{os.cpu_count()} logical cores, 1-min load average at each start "
        f"{[round(x, 2) for x in loads]}",
        f"{'case':<14} {'mode':<8} {'median ms per run':<48} {'spread':>7}  verdict",
    ]
    worst = 0.0
    for (case, mode), values in medians.items():
        if any(v is None for v in values):
            lines.append(f"{case:<14} {mode:<8} some runs had no figure: {values}")
            worst = float("inf")
            continue
        spread = (max(values) - min(values)) / statistics.median(values)
        worst = max(worst, spread)
        lines.append(
            f"{case:<14} {mode:<8} {str([round(v, 3) for v in values]):<48} "
            f"{spread:>7.1%}  {'within' if spread <= args.target else 'OUTSIDE'} "
            f"{args.target:.0%}"
        )
    host_spread = (max(host_ms) - min(host_ms)) / statistics.median(host_ms)
    lines.append(
        f"{'host speed':<14} {'(1-thread 512x512 matmul, before each run)':<57} "
        f"{str([round(v, 4) for v in host_ms])} spread {host_spread:.1%}"
    )
    lines.append(
        f"largest spread {worst:.1%} (target {args.target:.0%}); spread = (max - min) / "
        "median of the per-run medians; a host-speed spread near or above the target "
        "means the machine itself was not steady"
    )
    emit(lines, args.out)
    return 0 if worst <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
