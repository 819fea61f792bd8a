"""The kernel ladder's op timing against torch.utils.benchmark on the same op calls.

The calls are the ones the kernel ladder times (``KernelLadder._op_call``: forward + backward
of one RMSNorm module at the input reduced llama gives it): transformers' LlamaRMSNorm and the
built-in fused custom op ``torchport_kernels::rms_norm``. Each is timed by torchport's timing
(``timing.sample_interleaved``, synchronised single calls, median) and by
torch.utils.benchmark.Timer.blocked_autorange, alternating for several rounds.
Target: the median of the per-round ratios within 3 % of 1.

    python benchmarks/kernel_op_timing.py --out docs/results/kernel_op_timing.txt
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402
from perf_vs_torch_benchmark import compare  # noqa: E402


def op_calls(batch: int, seq: int) -> dict:
    import torch
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from torchport.cases.kernels import rms_norm_replacement
    from torchport.runner.kernel_ladder import KernelLadder

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
    parser.add_argument("--budget-s", type=float, default=0.5, help="per side per round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--target", type=float, default=0.03)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from torchport.devices import get_adapter

    adapter = get_adapter("cpu")
    lines = [
        "$ python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        f"torch {torch.__version__}, cpu, float32, {torch.get_num_threads()} threads, "
        f"load average {os.getloadavg()[0]:.2f} (a shared 2-core host: other jobs ran)",
        f"{'op (forward + backward)':<30} {'shape':>9} {'torchport ms':>13} "
        f"{'torch.utils.benchmark ms':>25} {'ratio':>7}  verdict",
    ]
    worst = 0.0
    for shape in args.shapes.split(","):
        batch, seq = (int(v) for v in shape.split("x"))
        for name, call in op_calls(batch, seq).items():
            result = compare(call, adapter, budget_s=args.budget_s, rounds=args.rounds)
            off = abs(result["ratio"] - 1)
            worst = max(worst, off)
            lines.append(
                f"{name:<30} {shape:>9} {result['torchport_ms']:>13.4g} "
                f"{result['torch_benchmark_ms']:>25.4g} {result['ratio']:>7.3f}  "
                f"{'within' if off <= args.target else 'OUTSIDE'} {args.target:.0%}"
            )
    lines.append(
        f"largest deviation {worst:.1%} (target {args.target:.0%}); ratio = median of per-round "
        f"ratios (torchport / torch.utils.benchmark); load average after "
        f"{os.getloadavg()[0]:.2f}"
    )
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
