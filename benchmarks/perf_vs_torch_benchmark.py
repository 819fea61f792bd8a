"""torchport's step time against an independent torch.utils.benchmark measurement.

The same step (a case at its perf size, placed on the device) is timed by torchport's perf
machinery (torchport.timing: warm-up, synchronised single-step samples, median) and by
torch.utils.benchmark.Timer.blocked_autorange (blocks of many calls, median of block means).
The two alternate for several rounds so load drift on a shared machine falls on both.
Target: the median of the per-round ratios (torchport / torch.utils.benchmark) within 3% of 1.

    python benchmarks/perf_vs_torch_benchmark.py --cases smoke/mlp,hf/llama \
        --out docs/results/perf_vs_torch.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402


def _step(suite: str, case_id: str, device: str, dtype_name: str):
    import torch

    from torchport.cases.base import Size
    from torchport.cases.registry import find_case
    from torchport.execution.steps import make_step, place

    workload = find_case(suite, case_id).build(seed=0, size=Size(perf=True))
    workload.model.eval()
    placed = place(workload, device, getattr(torch, dtype_name))
    return make_step(placed.model, placed.model, placed)


def compare(step, adapter, *, budget_s: float, rounds: int, clock=None, blocked=False) -> dict:
    """Alternate the two measurements for ``rounds`` rounds (order swapped every round).

    On a shared machine the load drifts over seconds; a pair measured back to back sees the
    same load, so the headline is the median of the per-round ratios. ``clock``, when given
    (e.g. ``time.thread_time``), is the clock both sides read instead of the wall clock.
    ``blocked``: torchport's side as its op timing measures short calls (``sample_blocked``:
    blocks of calls, the median block's time per call), else as its step timing (single calls).
    """
    import contextlib
    from unittest import mock

    import torch
    from torch.utils.benchmark import Timer

    from torchport import timing
    from torchport.timing import (
        Summary,
        round_order,
        sample_blocked,
        sample_interleaved,
        step_timer,
    )

    timer = Timer(
        stmt="step()",
        globals={"step": step},
        num_threads=torch.get_num_threads(),
        **({"timer": clock} if clock is not None else {}),
    )
    on_clock = (
        (lambda: mock.patch.object(timing, "clock", clock))
        if clock is not None
        else contextlib.nullcontext
    )
    measure = {
        "torchport": lambda: _summary_on(
            on_clock,
            lambda: (
                sample_blocked({"step": step}, step_timer(adapter), budget_s=budget_s)[0]
                if blocked
                else sample_interleaved({"step": step}, step_timer(adapter), budget_s=budget_s)
            )["step"],
            Summary,
        ),
        "torch.utils.benchmark": lambda: _measurement(
            timer.blocked_autorange(min_run_time=budget_s)
        ),
    }
    # per round and side: (median, mean) in seconds; torchport's median is of single calls,
    # utils.benchmark's of block means; the means are the same statistic on both sides
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in measure}
    for index in range(rounds):
        for name in round_order(list(measure), index):
            got[name].append(measure[name]())
    ours = [m for m, _ in got["torchport"]]
    theirs = [m for m, _ in got["torch.utils.benchmark"]]
    ours_mean = [m for _, m in got["torchport"]]
    theirs_mean = [m for _, m in got["torch.utils.benchmark"]]
    return {
        "torchport_ms": statistics.median(ours) * 1e3,
        "torch_benchmark_ms": statistics.median(theirs) * 1e3,
        "ratio": statistics.median(a / b for a, b in zip(ours, theirs, strict=True)),
        "ratio_of_medians": statistics.median(ours) / statistics.median(theirs),
        "ratio_of_means": statistics.median(
            a / b for a, b in zip(ours_mean, theirs_mean, strict=True)
        ),
        "rounds_torchport_ms": [x * 1e3 for x in ours],
        "rounds_torch_benchmark_ms": [x * 1e3 for x in theirs],
    }


def _summary_on(on_clock, sample, summary) -> tuple[float, float]:
    with on_clock():
        got = summary.of(sample())
    return got.median_s, got.mean_s


def _measurement(measured) -> tuple[float, float]:
    return measured.median, measured.mean


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="smoke")
    parser.add_argument("--cases", default="smoke/mlp,hf/llama")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--budget-s", type=float, default=0.5, help="per side per round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--target", type=float, default=0.03)
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    import torch

    from torchport.devices import get_adapter

    if args.threads:
        torch.set_num_threads(args.threads)
    adapter = get_adapter(args.device)
    adapter.prepare()
    lines = [
        "$ python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        f"torch {torch.__version__}, device {args.device}, dtype {args.dtype}, "
        f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.2f}",
        f"{'case':<16} {'torchport ms':>13} {'torch.utils.benchmark ms':>25} {'ratio':>7}"
        f" {'ratio of medians':>17}  verdict",
    ]
    worst = 0.0
    for case_id in args.cases.split(","):
        step = _step(args.suite, case_id, adapter.device(), args.dtype)
        result = compare(step, adapter, budget_s=args.budget_s, rounds=args.rounds)
        off = abs(result["ratio"] - 1)
        worst = max(worst, off)
        lines.append(
            f"{case_id:<16} {result['torchport_ms']:>13.4g} "
            f"{result['torch_benchmark_ms']:>25.4g} {result['ratio']:>7.3f} "
            f"{result['ratio_of_medians']:>17.3f}  "
            f"{'within' if off <= args.target else 'OUTSIDE'} {args.target:.0%}"
        )
        lines.append(
            f"  rounds: torchport {[round(x, 4) for x in result['rounds_torchport_ms']]}"
            f", torch.utils.benchmark "
            f"{[round(x, 4) for x in result['rounds_torch_benchmark_ms']]}"
        )
    lines.append(
        f"largest deviation {worst:.1%} (target {args.target:.0%}); ratio = median of "
        f"per-round ratios; load average after {os.getloadavg()[0]:.2f}"
    )
    emit(lines, args.out)
    return 0 if worst <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
