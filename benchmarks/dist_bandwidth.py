"""all_reduce bus bandwidth: torchport's timing against a hand-written loop, paired round by round.

The host's speed drifts (up to 2x over seconds on a shared VM), so two sides timed one after
the other cannot be compared to 10 %. Here both sides run in the same ranks and the same
process group, round by round, and the judgement is the median of the per-round ratios:

- one world of two ranks on gloo, started as torchport's launcher starts its ranks (plain
  processes with c10d's env:// variables and the same environment), set up as torchport's rank
  is (the device adapter's ``prepare``, simccl registered, ``init_process_group`` with the
  backend torchport picks for the device);
- torchport's side is its own code, unchanged: the buffers and call of ``_bandwidth_calls``
  (the call the ``dist/bandwidth`` case times), the device adapter's ``synchronize``,
  ``warm_up`` and ``collective_round`` from ``runner/dist/collectives.py``;
- the hand-written side is nccl-tests' loop written out plainly (warm-up calls; per round a
  barrier, the clock, N ``dist.all_reduce`` calls on its own buffer, the clock; the ranks' mean,
  as nccl-tests' default ``-a 1``);
- per size, rounds alternate hand/torchport and torchport/hand, with Python's garbage
  collector off, until both sides' timed calls took the budget; each round gives a pair;
- torchport/hand = hand time / torchport time of one round (above 1: torchport measured the
  higher bandwidth); the median over the rounds of every world, with p10 and p90.
Target: the median within 10 % of 1. Also measured: the loop's own cost per call, each side
timing a no-op in place of the collective (paired the same way), so any per-call work in
torchport's loop (a synchronisation, a clock read, a wrapper) shows as nanoseconds per call.

    python benchmarks/dist_bandwidth.py --out docs/results/dist_bandwidth.txt
"""

from __future__ import annotations

import argparse
import functools
import gc
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
MAX_ROUNDS, MIN_ROUNDS, BUDGET_S = 401, 41, 6.0  # per size and world: both sides' timed calls
NOOP_ROUNDS = 201


def load() -> str:
    return "load {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


def median_ci(values: list[float]) -> tuple[float, float]:
    """A distribution-free 95 % interval for the median: the order statistics n/2 -+
    0.98 sqrt(n) (the binomial's normal approximation)."""
    ordered = sorted(values)
    n = len(ordered)
    half = 0.98 * n**0.5
    return ordered[max(0, int(n / 2 - half))], ordered[min(n - 1, int(n / 2 + half))]


def paired_rank(out: str, sizes: list[int], iters: int, warmup: int) -> None:
    """One rank: per size, rounds of both sides back to back (env:// variables set by
    ``run_world``). Rank 0 writes {size: [[hand_s, torchport_s], ...]} and the no-op pairs."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from torchport.devices import get_adapter
    from torchport.devices.simdev_dist import register as register_simccl
    from torchport.runner.dist import collectives as dc
    from torchport.runner.dist.rank import backend_for
    from torchport.timing import round_order

    adapter = get_adapter("cpu")
    adapter.prepare()  # as torchport's rank does
    register_simccl()
    adapter.register_collectives()
    dist.init_process_group(backend_for(adapter, None), timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    sync = adapter.synchronize

    def hand_round(buf: torch.Tensor) -> float:
        # nccl-tests' timed block, written out: barrier, clock, calls, clock; the ranks' mean
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
        dist.all_reduce(elapsed)
        return float(elapsed) / world

    pairs: dict[int, list[list[float]]] = {}
    for n in sizes:
        ours = dc._bandwidth_calls(n, world, "cpu")["all_reduce"][0]  # what the case times
        buf = torch.full((n,), 1.0 / world)
        for _ in range(warmup):
            dist.all_reduce(buf)
        dc.warm_up(ours, device="cpu", sync=sync, warmup=warmup, budget_s=dc.BANDWIDTH_BUDGET_S)
        sides = {
            "hand": lambda b=buf: hand_round(b),
            "torchport": lambda f=ours: dc.collective_round(
                f, device="cpu", sync=sync, iters=iters
            ),
        }
        pairs[n] = _paired(sides, iters, round_order)
    # the loop's own cost: a no-op in place of the collective, called as each side calls
    # its all_reduce (torchport through a partial, as ``_bandwidth_calls`` makes its calls;
    # the hand loop directly)
    token = torch.zeros(1)
    noop_sides = {
        "hand": _noop_hand(dist, torch, iters, world, token),
        "torchport": lambda: dc.collective_round(
            functools.partial(_noop, token), device="cpu", sync=sync, iters=iters
        ),
    }
    noop = _paired(noop_sides, iters, round_order, rounds=NOOP_ROUNDS, budget_s=1e9)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"pairs": pairs, "noop": noop, "torch_threads": torch.get_num_threads()}, f)
    dist.destroy_process_group()


def _noop(buf) -> None:
    return None


def _noop_hand(dist, torch, iters: int, world: int, buf):
    def hand_round() -> float:
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            _noop(buf)
        elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
        dist.all_reduce(elapsed)
        return float(elapsed) / world

    return hand_round


def _paired(sides, iters, round_order, *, rounds=MAX_ROUNDS, budget_s=BUDGET_S):
    """[[hand_s, torchport_s], ...]: one pair per round, the order alternating; stops after
    MIN_ROUNDS once both sides' timed calls took ``budget_s`` (every rank sees the same
    shared times, so every rank stops at the same round)."""
    out: list[list[float]] = []
    spent = 0.0
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            got = {}
            for name in round_order(["hand", "torchport"], r):
                got[name] = sides[name]()
            out.append([got["hand"], got["torchport"]])
            spent += (got["hand"] + got["torchport"]) * iters
            if len(out) >= MIN_ROUNDS and spent >= budget_s:
                break
    finally:
        gc.enable()
    return out


def run_world(sizes: list[int], iters: int, warmup: int) -> dict:
    """Start the ranks as torchport's launcher does; return rank 0's pairs."""
    from torchport.runner.dist.launch import free_port

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "pairs.json")
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
            cmd = [sys.executable, os.path.abspath(__file__), "--paired-rank", out]
            cmd += ["--counts", f"{iters},{warmup}"]
            cmd += ["--sizes", ",".join(str(n) for n in sizes)]
            procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL))
        codes = [p.wait(timeout=600) for p in procs]
        if any(codes):
            raise SystemExit(f"the benchmark's ranks exited with {codes}")
        with open(out) as f:
            return json.load(f)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--worlds", type=int, default=2, help="fresh worlds, pairs pooled")
    parser.add_argument("--paired-rank", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--counts", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--sizes", default=",".join(str(n) for n in SIZES), help="float32 elements per rank"
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    if args.paired_rank:
        iters, warmup = (int(v) for v in args.counts.split(","))
        paired_rank(args.paired_rank, sizes, iters, warmup)
        return
    from torchport.runner.dist import collectives as dc
    from torchport.timing import Summary

    iters, warmup = dc.BANDWIDTH_ITERS, dc.BANDWIDTH_WARMUP
    command = "python benchmarks/dist_bandwidth.py"
    if args.worlds != 2:
        command += f" --worlds {args.worlds}"
    if sizes != list(SIZES):
        command += f" --sizes {args.sizes}"
    lines = [
        command + (f" --out {args.out}" if args.out else ""),
        f"all_reduce, gloo, world {WORLD}, float32; per size {warmup} warm-up calls a side, "
        f"then rounds of {iters} calls a side, hand and torchport back to back (order "
        f"alternating), {MIN_ROUNDS}-{MAX_ROUNDS} rounds until both sides' calls took "
        f"{BUDGET_S:g} s; {args.worlds} fresh worlds, pairs pooled; {load()} at start on "
        f"{os.cpu_count()} cores",
    ]
    started = time.monotonic()
    pairs: dict[int, list[list[float]]] = {n: [] for n in sizes}
    per_world: dict[int, list[float]] = {n: [] for n in sizes}
    # the ratios of the rounds where the hand loop ran first, and where torchport did
    by_order: dict[int, tuple[list[float], list[float]]] = {n: ([], []) for n in sizes}
    noop: list[list[float]] = []
    threads = set()
    for _ in range(args.worlds):
        data = run_world(sizes, iters, warmup)
        threads.add(data["torch_threads"])
        for n, got in data["pairs"].items():
            pairs[int(n)] += got
            per_world[int(n)].append(statistics.median(h / t for h, t in got))
            for r, (h, t) in enumerate(got):  # round_order: even rounds run the hand loop first
                by_order[int(n)][r % 2].append(h / t)
        noop += data["noop"]
    lines.append(f"torch threads per rank: {sorted(threads)} (one process runs both sides)")
    lines.append(
        f"{'elements':>10} {'bytes':>10} {'hand busbw':>11} {'tp busbw':>9} {'pairs':>6} "
        f"{'torchport/hand':>15} {'95% CI':>13} {'p10':>6} {'p90':>6} {'per world':>14} "
        f"{'hand 1st':>9} "
        f"{'tp 1st':>7}"
    )
    worst = 0.0
    for n in sizes:
        nbytes = n * 4
        ratios = [h / t for h, t in pairs[n]]
        summary = Summary.of(ratios)  # median, p10 and p90 of the per-round ratios
        median = summary.median_s
        worst = max(worst, abs(median - 1))
        # busbw = algbw x 2(n-1)/n = algbw at n = 2; GB/s, 10^9 bytes/s as nccl-tests
        hand_bw = nbytes / statistics.median(h for h, _ in pairs[n]) / 1e9
        our_bw = nbytes / statistics.median(t for _, t in pairs[n]) / 1e9
        worlds = ", ".join(f"{r:.3f}" for r in per_world[n])
        lines.append(
            f"{n:>10} {nbytes:>10} {hand_bw:>11.3f} {our_bw:>9.3f} {len(ratios):>6} "
            f"{median:>15.3f} {'{:.3f}-{:.3f}'.format(*median_ci(ratios)):>13} "
            f"{summary.p10_s:>6.3f} {summary.p90_s:>6.3f} "
            f"{worlds:>14} {statistics.median(by_order[n][0]):>9.3f} "
            f"{statistics.median(by_order[n][1]):>7.3f}"
        )
    hand_ns = statistics.median(h for h, _ in noop) * 1e9
    our_ns = statistics.median(t for _, t in noop) * 1e9
    diff = statistics.median(t - h for h, t in noop) * 1e9
    lines.append(
        f"the loops' own cost (a no-op in place of the all_reduce, {len(noop)} pairs): hand "
        f"{hand_ns:.0f} ns/call, torchport {our_ns:.0f} ns/call, paired difference "
        f"{diff:+.0f} ns/call"
    )
    verdict = "met" if worst <= 0.10 else "not met"
    lines.append(
        f"largest |median - 1|: {worst * 100:.1f} % (target: within 10 %: {verdict}); "
        f"busbw columns: each side's median time over the same rounds (GB/s); hand 1st / "
        f"tp 1st: the median ratio of the rounds each side ran first in; 95% CI: of the "
        f"median, from order statistics; "
        f"{time.monotonic() - started:.0f} s wall; {load()} at end"
    )
    emit(lines, args.out)


if __name__ == "__main__":
    main()
