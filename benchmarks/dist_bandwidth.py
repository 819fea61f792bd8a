"""all_reduce bus bandwidth: torchport's dist/bandwidth case against a hand-written loop.

Both sides are worlds of two ranks on gloo over the same sizes (float32 elements per rank),
with the same rounds and calls per round; the hand-written side is the plain nccl-tests style
loop (barrier, clock, N all_reduce calls, clock; the slowest rank's time; median over rounds).
The two sides alternate (hand, torchport, hand, torchport) so drift on the shared host falls on
both. Target: torchport within 10 % of the loop.

    python benchmarks/dist_bandwidth.py --out docs/results/dist_bandwidth.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402

SIZES = (1024, 16_384, 262_144, 1_048_576, 4_194_304)
ROUNDS, ITERS = 7, 5  # as runner/dist_collectives.bandwidth


def load() -> str:
    return "load {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


def _hand_rank(rank: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    times = {}
    for n in SIZES:
        buf = torch.ones(n)
        dist.all_reduce(buf)  # warm-up
        samples = []
        for r in range(ROUNDS + 1):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(ITERS):
                dist.all_reduce(buf)
            elapsed = torch.tensor([(time.perf_counter() - start) / ITERS], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            if r > 0:
                samples.append(float(elapsed))
        times[n] = statistics.median(samples)
    if rank == 0:
        with open(out, "w") as f:
            f.write(repr(times))
    dist.destroy_process_group()


def hand_loop() -> dict[int, float]:
    """Median seconds per all_reduce call, per size."""
    import ast

    import torch.multiprocessing as mp

    from torchport.runner.dist_launch import free_port

    out = tempfile.mktemp()
    mp.spawn(_hand_rank, args=(free_port(), out), nprocs=2)
    with open(out) as f:
        return ast.literal_eval(f.read())


def torchport_side() -> dict[int, float]:
    from torchport.cases.dist import DistCase, DistSpec
    from torchport.config import RunConfig
    from torchport.devices import get_adapter
    from torchport.runner.dist_ladder import DistLadder

    case = DistCase("dist/bandwidth", DistSpec(kind="bandwidth", sizes=SIZES))
    adapter = get_adapter("cpu")
    result = DistLadder(
        case, "eager", RunConfig(device="cpu", timeout_s=600), adapter, lambda e: None, {}
    ).run()
    if result["status"] != "pass":
        raise SystemExit(f"torchport's bandwidth case did not pass: {result['error']}")
    return {
        r["size"]: r["time_s"]
        for r in result["findings"]["dist_bandwidth"]
        if r["collective"] == "all_reduce"
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    lines = [
        "python benchmarks/dist_bandwidth.py" + (f" --out {args.out}" if args.out else ""),
        f"all_reduce, gloo, world 2, float32; {ROUNDS} rounds x {ITERS} calls; {load()} "
        f"at start on {os.cpu_count()} cores",
    ]
    hand: dict[int, list[float]] = {n: [] for n in SIZES}
    ours: dict[int, list[float]] = {n: [] for n in SIZES}
    for _ in range(args.repeats):
        for n, t in hand_loop().items():
            hand[n].append(t)
        for n, t in torchport_side().items():
            ours[n].append(t)
    lines.append(
        f"{'elements':>10} {'bytes':>10} {'hand busbw GB/s':>16} {'torchport busbw':>16} "
        f"{'torchport/hand':>15}"
    )
    worst = 0.0
    for n in SIZES:
        nbytes = n * 4
        hand_bw = nbytes / statistics.median(hand[n]) / 1e9  # factor 2(n-1)/n = 1 at n = 2
        our_bw = nbytes / statistics.median(ours[n]) / 1e9
        worst = max(worst, abs(our_bw / hand_bw - 1))
        lines.append(
            f"{n:>10} {nbytes:>10} {hand_bw:>16.3f} {our_bw:>16.3f} {our_bw / hand_bw:>15.3f}"
        )
    lines.append(f"largest difference: {worst * 100:.1f} % (target: within 10 %); {load()} at end")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
