"""The kernel ladder's op timing against torch.utils.benchmark on the same op calls.

The calls are the ones the kernel ladder times (``KernelLadder._op_call``: forward + backward
of one RMSNorm module at the input reduced llama gives it): transformers' LlamaRMSNorm and the
built-in fused custom op ``torchport_kernels::rms_norm``. Each is timed by torchport's op timing
(``timing.sample_blocked``: synchronised blocks of calls sized to last 10 ms, median time per
call) and by torch.utils.benchmark.Timer.blocked_autorange (median of block means), alternating
for several rounds, on the same inputs and the same number of threads.
Target: the median of the per-round ratios within 3 % of 1.

Two clocks (``--clock``): ``wall`` (perf_counter, what both use by default) and ``thread``
(``time.thread_time``, this thread's CPU time, given to both: utils.benchmark's ``timer=`` and
torchport's ``timing.clock``). Until torchport timed ops in blocks, its median single call
left out the scheduler waits a block of calls pays for on a loaded host (and, on a quiet one,
read 3-5 % under the block means: a single call's median sits below the mean of a skewed
distribution); the thread clock counts only this thread's work (with ``--threads 1`` forward
and backward run on this thread), so it compares the timers whatever the load.

Many short rounds (40 x 0.2 s per side by default) rather than a few long ones: this VM's speed
drifts by up to 2x over seconds, and a pair measured within a fraction of a second sees one speed.

    python benchmarks/kernel_op_timing.py --threads 1 --out docs/results/kernel_op_timing.txt
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402
from perf_vs_torch_benchmark import compare  # noqa: E402


def op_calls(batch: int, seq: int) -> dict:
    import torch
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from torchport.cases.kernels import rms_norm_replacement
    from torchport.runner.kernels.ladder import KernelLadder

    torch.manual_seed(0)
    original = LlamaRMSNorm(64, eps=1e-6)
    replaced = rms_norm_replacement("rms_norm").make(LlamaRMSNorm(64, eps=1e-6))
    x = torch.randn(batch, seq, 64)
    cot = torch.randn(batch, seq, 64)
    return {
        "LlamaRMSNorm": KernelLadder._op_call(original, x, cot),
        "torchport_kernels::rms_norm": KernelLadder._op_call(replaced, x, cot),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="2x16,4x128", help="batch x seq, comma separated")
    parser.add_argument("--budget-s", type=float, default=0.2, help="per side per round")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--target", type=float, default=0.03)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--clock", choices=("wall", "thread", "both"), default="both")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from torchport.devices import get_adapter

    adapter = get_adapter("cpu")
    clocks = {"wall": None, "thread": time.thread_time}
    chosen = list(clocks) if args.clock == "both" else [args.clock]
    lines = [
        "$ python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        f"torch {torch.__version__}, cpu, float32, {torch.get_num_threads()} threads, "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores (`uptime`: 1 min)",
        f"{'op (forward + backward)':<30} {'shape':>9} {'clock':>6} {'torchport ms':>13} "
        f"{'torch.utils.benchmark ms':>25} {'ratio':>7} {'means':>6}  verdict",
    ]
    worst = {name: 0.0 for name in chosen}
    for shape in args.shapes.split(","):
        batch, seq = (int(v) for v in shape.split("x"))
        for name, call in op_calls(batch, seq).items():
            for clock_name in chosen:
                result = compare(
                    call,
                    adapter,
                    budget_s=args.budget_s,
                    rounds=args.rounds,
                    clock=clocks[clock_name],
                    blocked=True,
                )
                off = abs(result["ratio"] - 1)
                worst[clock_name] = max(worst[clock_name], off)
                lines.append(
                    f"{name:<30} {shape:>9} {clock_name:>6} {result['torchport_ms']:>13.4g} "
                    f"{result['torch_benchmark_ms']:>25.4g} {result['ratio']:>7.3f} "
                    f"{result['ratio_of_means']:>6.3f}  "
                    f"{'within' if off <= args.target else 'OUTSIDE'} {args.target:.0%}"
                )
    lines.append(
        "largest deviation "
        + ", ".join(f"{worst[c]:.1%} ({c} clock)" for c in chosen)
        + f" (target {args.target:.0%}); ratio = median of per-round ratios (torchport / "
        "torch.utils.benchmark) of the two sides' median time per call over blocks; "
        "means = the same for the two sides' mean call time; load average after "
        f"{os.getloadavg()[0]:.2f}"
    )
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
