"""all_reduce bus bandwidth: torchport's dist/bandwidth case against a hand-written loop.

Both sides are worlds of two ranks on gloo, alike in everything but the code under test:
- the same launch: N plain processes with c10d's env:// variables and the environment
  torchport's launcher gives its ranks (this script starts the hand-written ranks itself, as
  ``runner/dist_launch.py`` starts torchport's), so thread pools and environment are the same;
  each side reports its ranks' torch thread count;
- the same sizes (float32 elements per rank), warm-up, rounds and calls per round;
- the hand-written side is nccl-tests' loop written out plainly (warm-up calls; per round a
  barrier, the clock, N all_reduce calls, the clock; the slowest rank's time; median over
  rounds); torchport times every collective and size in its own such block;
- each side's figure is the median over the repeats of each repeat's median.
The sides alternate (hand, torchport, hand, torchport ...) so drift on the host falls on both.
Target: torchport within 10 % of the loop. The p10-p90 spread of each side is printed: a
difference inside the spread is noise.

    python benchmarks/dist_bandwidth.py --out docs/results/dist_bandwidth.txt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402

SIZES = (1024, 16_384, 262_144, 1_048_576, 4_194_304)
WORLD = 2


def load() -> str:
    return "load {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


def _counts() -> tuple[int, int, int]:
    """torchport's warm-up, rounds and calls per round (the numbers only: the hand side's loop
    is its own code)."""
    from torchport.runner import dist_collectives as dc

    return dc.BANDWIDTH_WARMUP, dc.BANDWIDTH_ROUNDS, dc.BANDWIDTH_ITERS


def _stop_rule() -> tuple[int, float]:
    """torchport's minimum rounds and budget: past the budget both sides stop alike."""
    from torchport.runner import dist_collectives as dc

    return dc.BANDWIDTH_MIN_ROUNDS, dc.BANDWIDTH_BUDGET_S


def hand_rank(out: str, warmup: int, rounds: int, iters: int, sizes) -> None:
    """One rank of the hand-written loop (env:// variables set by ``hand_loop``)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    times: dict[int, list[float]] = {}
    min_rounds, budget_s = _stop_rule()
    for n in sizes:
        buf = torch.full((n,), 1.0 / world)
        for _ in range(warmup):
            dist.all_reduce(buf)
        samples = []
        for _ in range(rounds):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf)
            elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            samples.append(float(elapsed))
            if len(samples) >= min_rounds and sum(samples) * iters >= budget_s:
                break
        times[n] = samples
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"times": times, "torch_threads": torch.get_num_threads()}, f)
    dist.destroy_process_group()


def hand_loop(warmup: int, rounds: int, iters: int, sizes) -> tuple[dict[int, list[float]], int]:
    """Per size, the per-call seconds of every round; and the ranks' torch thread count."""
    from torchport.runner.dist_launch import free_port

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "hand.json")
        port = free_port()
        procs = []
        for rank in range(WORLD):
            env = {
                **os.environ,
                "TORCHINDUCTOR_COMPILE_THREADS": "1",  # as torchport's launcher sets
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(WORLD),
                "LOCAL_WORLD_SIZE": str(WORLD),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            }
            cmd = [sys.executable, os.path.abspath(__file__), "--hand-rank", out]
            cmd += ["--counts", f"{warmup},{rounds},{iters}"]
            cmd += ["--sizes", ",".join(str(n) for n in sizes)]
            procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL))
        codes = [p.wait(timeout=900) for p in procs]
        if any(codes):
            raise SystemExit(f"the hand-written ranks exited with {codes}")
        with open(out) as f:
            data = json.load(f)
    return {int(n): t for n, t in data["times"].items()}, data["torch_threads"]


def torchport_side(sizes) -> tuple[dict[int, list[float]], list[int]]:
    """Per size, torchport's all_reduce (median, p10, p90) seconds; its ranks' thread counts."""
    from torchport.cases.dist import DistCase, DistSpec
    from torchport.config import RunConfig
    from torchport.devices import get_adapter
    from torchport.runner.dist_ladder import DistLadder

    case = DistCase("dist/bandwidth", DistSpec(kind="bandwidth", sizes=tuple(sizes)))
    adapter = get_adapter("cpu")
    result = DistLadder(
        case, "eager", RunConfig(device="cpu", timeout_s=900), adapter, lambda e: None, {}
    ).run()
    if result["status"] != "pass":
        raise SystemExit(f"torchport's bandwidth case did not pass: {result['error']}")
    rows = {
        r["size"]: [r["time_s"], r["time_p10_s"], r["time_p90_s"]]
        for r in result["findings"]["dist_bandwidth"]
        if r["collective"] == "all_reduce"
    }
    threads = [r.get("torch_threads") for r in result["findings"]["dist"]["ranks"]]
    return rows, threads


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hand-rank", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--counts", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--sizes", default=",".join(str(n) for n in SIZES), help="float32 elements per rank"
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    if args.hand_rank:
        warmup, rounds, iters = (int(v) for v in args.counts.split(","))
        hand_rank(args.hand_rank, warmup, rounds, iters, sizes)
        return
    warmup, rounds, iters = _counts()
    command = "python benchmarks/dist_bandwidth.py" + (
        f" --repeats {args.repeats}" if args.repeats != 3 else ""
    )
    if sizes != list(SIZES):
        command += f" --sizes {args.sizes}"
    lines = [
        command + (f" --out {args.out}" if args.out else ""),
        f"all_reduce, gloo, world {WORLD}, float32; per size {warmup} warm-up calls, then up "
        f"to {rounds} rounds x {iters} calls (both sides stop after {_stop_rule()[0]} rounds "
        f"once the calls took {_stop_rule()[1]:g} s), slowest rank; {args.repeats} alternating "
        f"repeats "
        f"per side; {load()} at start on {os.cpu_count()} cores",
    ]
    started = time.monotonic()
    # per side and size: each repeat's median and (p90 - p10) / median of its rounds
    hand: dict[int, list[float]] = {n: [] for n in sizes}
    hand_spread: dict[int, list[float]] = {n: [] for n in sizes}
    ours: dict[int, list[float]] = {n: [] for n in sizes}
    our_spread: dict[int, list[float]] = {n: [] for n in sizes}
    hand_threads, our_threads = set(), set()
    for _ in range(args.repeats):
        times, threads = hand_loop(warmup, rounds, iters, sizes)
        hand_threads.add(threads)
        for n, t in times.items():
            median = _quantile(t, 0.5)
            hand[n].append(median)
            hand_spread[n].append((_quantile(t, 0.9) - _quantile(t, 0.1)) / median)
        rows, threads_list = torchport_side(sizes)
        our_threads.update(threads_list)
        for n, (median, p10, p90) in rows.items():
            ours[n].append(median)
            our_spread[n].append((p90 - p10) / median)
    lines.append(
        f"torch threads per rank: hand-written {sorted(hand_threads)}, torchport "
        f"{sorted(our_threads)}"
    )
    lines.append(
        f"{'elements':>10} {'bytes':>10} {'hand busbw GB/s':>16} {'hand spread':>12} "
        f"{'torchport busbw':>16} {'tp spread':>10} {'torchport/hand':>15}"
    )
    worst = 0.0
    for n in sizes:
        nbytes = n * 4
        hand_bw = nbytes / statistics.median(hand[n]) / 1e9  # factor 2(n-1)/n = 1 at n = 2
        our_bw = nbytes / statistics.median(ours[n]) / 1e9
        worst = max(worst, abs(our_bw / hand_bw - 1))
        lines.append(
            f"{n:>10} {nbytes:>10} {hand_bw:>16.3f} {max(hand_spread[n]):>12.2f} {our_bw:>16.3f} "
            f"{max(our_spread[n]):>10.2f} {our_bw / hand_bw:>15.3f}"
        )
    lines.append(
        f"largest difference: {worst * 100:.1f} % (target: within 10 %); busbw from the median "
        f"of the repeats' medians; spread = (p90 - p10) / median of one repeat's rounds, the "
        f"widest repeat; "
        f"{time.monotonic() - started:.0f} s wall; {load()} at end"
    )
    emit(lines, args.out)


if __name__ == "__main__":
    main()
