"""Collective conformance and bandwidth, as run by each rank of a dist case.

Conformance: every rank makes every rank's input from the seed (so each knows the whole world's
inputs without communicating), runs the collective on the device, and compares its own output
with the value computed on the CPU in float64 (exact for int64 and bool). A float result may
differ from the float64 value by the rounding of the sum: at most ``2 · world · eps(dtype) ·
Σ|x_r|`` per element. What the backend refuses (it raises for a dtype, op or layout) is a
``skip`` row with the exception as its reason, except on the core rows (float32, contiguous,
all_reduce sum, all_gather, broadcast) and barrier: a backend that cannot do those fails.

Bandwidth: nccl-tests' definitions. algbw = bytes / time, busbw = algbw · factor with factor
2(n−1)/n for all_reduce, (n−1)/n for all_gather, reduce_scatter and all_to_all, 1 for broadcast;
bytes is the size of the largest buffer (the gathered output, the scattered input). As in
nccl-tests, each collective and size is timed on its own: warm-up calls, then rounds of
``iters`` calls between a barrier and a device synchronisation; a round's time is the mean of
the ranks' times (nccl-tests' default, its ``-a 1``; an all_reduce outside the timed region).
The collectives are not compared with each other, so nothing is interleaved: another
collective between two rounds would only disturb the one being timed.
"""

from __future__ import annotations

import contextlib
import gc
import traceback
from collections.abc import Callable
from functools import partial

import torch
import torch.distributed as dist

from torchport.runner.dist.guard import INT_AVG_CONVENTION
from torchport.timing import Summary, clock

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int64": torch.int64,
    "bool": torch.bool,
}
REDUCE_OPS = ("sum", "avg", "max", "min", "product")
# An integer AVG divides the integer sum by the world size: NCCL and C truncate toward zero,
# Python's // floors; they differ for a negative sum the world size does not divide.
AVG_CONVENTIONS = {"trunc": "truncation toward zero (C, NCCL)", "floor": "floor division (//)"}
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather_into_tensor": lambda n: (n - 1) / n,
    "reduce_scatter_tensor": lambda n: (n - 1) / n,
    "all_to_all_single": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def _op(name: str):
    return getattr(dist.ReduceOp, name.upper())


def make_input(seed: int, rank: int, n: int, dtype: str, *, positive: bool = False):
    """Rank ``rank``'s input of ``n`` elements: float64 values exactly representable in
    ``dtype`` (so the float64 reference sees what the device saw)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + rank * 7919 + n)
    if dtype == "bool":
        return torch.rand(n, generator=g, dtype=torch.float64) > 0.5
    if dtype == "int64":
        if positive:
            return torch.randint(1, 4, (n,), generator=g, dtype=torch.int64)
        return torch.randint(-1000, 1000, (n,), generator=g, dtype=torch.int64)
    if positive:  # products stay near 1
        values = 0.75 + 0.5 * torch.rand(n, generator=g, dtype=torch.float64)
    else:
        values = torch.randn(n, generator=g, dtype=torch.float64)
    return values.to(DTYPES[dtype]).to(torch.float64)


def reduce_f64(
    values: list[torch.Tensor], op: str, dtype: str, *, convention: str = "trunc"
) -> torch.Tensor:
    """The reduction over ranks computed on the CPU in float64 (int64/bool exactly); an
    integer AVG rounds by ``convention`` (``AVG_CONVENTIONS``)."""
    stacked = torch.stack(values)
    if dtype == "bool":
        return stacked.any(0) if op in ("sum", "max") else stacked.all(0)
    if op == "sum":
        return stacked.sum(0)
    if op == "avg" and dtype == "int64":
        return torch.div(stacked.sum(0), len(values), rounding_mode=convention)
    if op == "avg":
        return stacked.sum(0) / len(values)
    if op == "product":
        return stacked.prod(0)
    return stacked.amax(0) if op == "max" else stacked.amin(0)


def compare(got: torch.Tensor, want: torch.Tensor, dtype: str, bound: torch.Tensor | None):
    """(ok, worst absolute error) of ``got`` (any device) against the float64 ``want``."""
    got64 = got.detach().to("cpu").reshape(-1)
    want = want.reshape(-1)
    if dtype in ("int64", "bool"):
        ok = got64.shape == want.shape and bool(torch.equal(got64.to(want.dtype), want))
        wrong = (got64.to(want.dtype) != want).sum().item() if got64.shape == want.shape else -1
        return ok, float(wrong)
    got64 = got64.to(torch.float64)
    if got64.shape != want.shape:
        return False, float("inf")
    err = (got64 - want).abs()
    worst = float(err.max()) if err.numel() else 0.0
    if bound is None:
        return bool(torch.equal(got64, want)), worst
    return bool((err <= bound).all()), worst


def float_bound(values: list[torch.Tensor], dtype: str) -> torch.Tensor | None:
    if dtype in ("int64", "bool"):
        return None
    eps = torch.finfo(DTYPES[dtype]).eps
    world = len(values)
    return 2 * world * eps * torch.stack(values).abs().sum(0) + torch.finfo(DTYPES[dtype]).tiny


class Conformance:
    """Runs every (collective, op, dtype, size, layout) row on this rank."""

    def __init__(
        self,
        *,
        rank: int,
        world: int,
        device: str,
        seed: int,
        sync,
        progress,
        record=None,
        guard=None,
        backend: str | None = None,
    ):
        self.rank, self.world, self.device, self.seed = rank, world, device, seed
        self.sync, self.progress = sync, progress
        self.rows: list[dict] = []
        # each collective's own deadline (guard.CollectiveDeadline): a context per row
        self.guard = guard or (lambda label: contextlib.nullcontext())
        # the integer AVG convention the backend documents (guard.INT_AVG_CONVENTION)
        self.int_avg = INT_AVG_CONVENTION.get(backend or "")
        # each finished row as it ends (the rank writes it to disk): a later collective that
        # kills the process (a backend's abort) does not take the rows before it along
        self.record = record or (lambda row: None)

    def _dev(self, values: torch.Tensor, dtype: str, *, strided: bool = False) -> torch.Tensor:
        """``values`` (float64 or bool/int64 on the CPU) as a ``dtype`` tensor on the device;
        ``strided``: a non-contiguous view (every other element of a twice-as-long buffer)."""
        tensor = values.to(DTYPES[dtype], copy=True)  # never the reference's own storage
        if strided:
            wide = torch.zeros(tensor.numel() * 2, dtype=tensor.dtype)
            wide[::2] = tensor
            return wide.to(self.device)[::2]
        return tensor.to(self.device)

    def _row(self, collective, op, dtype, n, layout, fn: Callable[[], tuple[bool, float]]):
        row = {
            "collective": collective,
            "op": op,
            "dtype": dtype,
            "size": n,
            "layout": layout,
            "rank": self.rank,
        }
        core = dtype == "float32" and layout == "contiguous" and op in ("", "sum")
        core = (core and collective in ("all_reduce", "all_gather", "broadcast")) or (
            collective == "barrier"
        )
        label = f"{collective}{'(' + op + ')' if op else ''} {dtype} n={n} {layout}"
        self.progress(label)
        note = None
        try:
            with self.guard(label):
                got = fn()
                self.sync()
            ok, worst = got[:2]
            note = got[2] if len(got) > 2 else None
        except Exception as exc:
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            if core:
                row.update(status="error", reason=reason, traceback=traceback.format_exc()[-3000:])
            else:
                row.update(status="skip", reason=f"the backend refused it: {reason}")
        else:
            row.update(status="pass" if ok else "fail", max_abs_err=worst)
            if note:
                row["note" if ok else "reason"] = note
        self.rows.append(row)
        self.record(row)

    def inputs(
        self, n: int, dtype: str, *, positive: bool = False, odd_negative: bool = False
    ) -> list[torch.Tensor]:
        """Every rank's input; ``odd_negative``: element 0 sums to -(world + 1) over the
        ranks, a negative sum that the world size does not divide (from a world of two on),
        where truncation toward zero and floor division of an integer AVG differ."""
        values = [make_input(self.seed, r, n, dtype, positive=positive) for r in range(self.world)]
        if odd_negative and n:
            for r, v in enumerate(values):
                v[0] = -(self.world + 1) if r == 0 else 0
        return values

    def _int_avg(self, got: torch.Tensor, values: list[torch.Tensor]):
        """(ok, wrong elements, note) of an integer AVG: judged by the convention the backend
        documents (``INT_AVG_CONVENTION``), else passing with either convention, the one it
        follows named."""
        results = {c: reduce_f64(values, "avg", "int64", convention=c) for c in AVG_CONVENTIONS}
        matched = [c for c in AVG_CONVENTIONS if compare(got, results[c], "int64", None)[0]]
        wrong = compare(got, results[self.int_avg or "trunc"], "int64", None)[1]
        if self.int_avg:
            other = [c for c in matched if c != self.int_avg]
            if self.int_avg in matched:
                return True, 0.0, f"integer AVG by {AVG_CONVENTIONS[self.int_avg]}, as documented"
            note = f"the backend documents {AVG_CONVENTIONS[self.int_avg]}" + (
                f", this is {AVG_CONVENTIONS[other[0]]}" if other else ""
            )
            return False, wrong, note
        if not matched:
            return False, wrong, "neither convention: " + " nor ".join(AVG_CONVENTIONS.values())
        if len(matched) == len(AVG_CONVENTIONS):
            return True, 0.0, "integer AVG: both conventions agree on these inputs"
        return (
            True,
            0.0,
            (
                f"integer AVG by {AVG_CONVENTIONS[matched[0]]} (the backend documents no "
                "convention; both are accepted)"
            ),
        )

    # -- the collectives ------------------------------------------------------------------
    def all_reduce(self, n: int, dtype: str, op: str, layout: str):
        int_avg = op == "avg" and dtype == "int64"

        def run():
            values = self.inputs(n, dtype, positive=op == "product", odd_negative=int_avg)
            tensor = self._dev(values[self.rank], dtype, strided=layout == "strided")
            dist.all_reduce(tensor, op=_op(op))
            if int_avg:
                return self._int_avg(tensor, values)
            bound = float_bound(values, dtype)
            if bound is not None and op in ("max", "min"):
                bound = None  # exact: a max is one of the inputs
            elif bound is not None and op == "avg":
                bound = bound / self.world + torch.finfo(DTYPES[dtype]).eps
            elif bound is not None and op == "product":
                bound = (
                    2
                    * self.world
                    * torch.finfo(DTYPES[dtype]).eps
                    * reduce_f64([v.abs() for v in values], "product", dtype)
                )
            return compare(tensor, reduce_f64(values, op, dtype), dtype, bound)

        self._row("all_reduce", op, dtype, n, layout, run)

    def all_gather(self, n: int, dtype: str, layout: str):
        def run():
            values = self.inputs(n, dtype)
            outs = [self._dev(torch.zeros(n, dtype=values[0].dtype), dtype) for _ in values]
            dist.all_gather(outs, self._dev(values[self.rank], dtype, strided=layout == "strided"))
            return compare(torch.cat([o.to("cpu") for o in outs]), torch.cat(values), dtype, None)

        self._row("all_gather", "", dtype, n, layout, run)

    def all_gather_into_tensor(self, n: int, dtype: str):
        def run():
            values = self.inputs(n, dtype)
            out = self._dev(torch.zeros(n * self.world, dtype=values[0].dtype), dtype)
            gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            gather(out, self._dev(values[self.rank], dtype))
            return compare(out, torch.cat(values), dtype, None)

        self._row("all_gather_into_tensor", "", dtype, n, "contiguous", run)

    def _scattered_want(self, n: int, dtype: str):
        # each rank contributes world chunks of n; rank r receives the sum of chunk r
        values = self.inputs(n * self.world, dtype)
        mine = [v.reshape(self.world, n)[self.rank] for v in values]
        return values, mine

    def reduce_scatter(self, n: int, dtype: str):
        def run():
            values, mine = self._scattered_want(n, dtype)
            chunks = [self._dev(c, dtype) for c in values[self.rank].reshape(self.world, n)]
            out = self._dev(torch.zeros(n, dtype=values[0].dtype), dtype)
            dist.reduce_scatter(out, chunks, op=dist.ReduceOp.SUM)
            return compare(out, reduce_f64(mine, "sum", dtype), dtype, float_bound(mine, dtype))

        self._row("reduce_scatter", "sum", dtype, n, "contiguous", run)

    def reduce_scatter_tensor(self, n: int, dtype: str):
        def run():
            values, mine = self._scattered_want(n, dtype)
            out = self._dev(torch.zeros(n, dtype=values[0].dtype), dtype)
            scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            scatter(out, self._dev(values[self.rank], dtype), op=dist.ReduceOp.SUM)
            return compare(out, reduce_f64(mine, "sum", dtype), dtype, float_bound(mine, dtype))

        self._row("reduce_scatter_tensor", "sum", dtype, n, "contiguous", run)

    def broadcast(self, n: int, dtype: str, layout: str):
        root = self.world - 1  # not rank 0: a backend that ignores the root is caught

        def run():
            values = self.inputs(n, dtype)
            tensor = self._dev(values[self.rank], dtype, strided=layout == "strided")
            dist.broadcast(tensor, src=root)
            return compare(tensor, values[root], dtype, None)

        self._row("broadcast", "", dtype, n, layout, run)

    def all_to_all_single(self, n: int, dtype: str):
        def run():
            values = self.inputs(n * self.world, dtype)
            out = self._dev(torch.zeros(n * self.world, dtype=values[0].dtype), dtype)
            dist.all_to_all_single(out, self._dev(values[self.rank], dtype))
            want = torch.cat([v.reshape(self.world, n)[self.rank] for v in values])
            return compare(out, want, dtype, None)

        self._row("all_to_all_single", "", dtype, n, "contiguous", run)

    def send_recv(self, n: int, dtype: str):
        """A ring: each rank sends to the next and receives from the previous."""

        def run():
            values = self.inputs(n, dtype)
            nxt, prev = (self.rank + 1) % self.world, (self.rank - 1) % self.world
            out = self._dev(torch.zeros(n, dtype=values[0].dtype), dtype)
            works = [
                dist.isend(self._dev(values[self.rank], dtype), nxt),
                dist.irecv(out, prev),
            ]
            for work in works:
                work.wait()
            return compare(out, values[prev], dtype, None)

        self._row("send_recv", "", dtype, n, "contiguous", run)

    def barrier(self):
        def run():
            dist.barrier()
            return True, 0.0

        self._row("barrier", "", "", 0, "", run)

    def run_all(self, sizes, dtypes, layouts=("contiguous",)) -> list[dict]:
        """Every row at every dtype and size; ``strided``: the collectives that take one
        input tensor (all_reduce, all_gather, broadcast) on a non-contiguous view."""
        self.barrier()
        for dtype in dtypes:
            for n in sizes:
                ops = ("max", "min") if dtype == "bool" else REDUCE_OPS
                if "contiguous" in layouts:
                    for op in ops:
                        self.all_reduce(n, dtype, op, "contiguous")
                    self.all_gather(n, dtype, "contiguous")
                    self.all_gather_into_tensor(n, dtype)
                    if dtype != "bool":
                        self.reduce_scatter(n, dtype)
                        self.reduce_scatter_tensor(n, dtype)
                    self.broadcast(n, dtype, "contiguous")
                    self.all_to_all_single(n, dtype)
                    self.send_recv(n, dtype)
                if "strided" in layouts and n > 1:
                    self.all_reduce(n, dtype, "max" if dtype == "bool" else "sum", "strided")
                    self.all_gather(n, dtype, "strided")
                    self.broadcast(n, dtype, "strided")
        self.barrier()
        return self.rows


# nccl-tests' shape of a measurement (its -w warm-up and -n iterations), repeated in rounds so
# the median comes with a spread; past the budget (timed calls of one collective and size) a
# slow backend stops at the minimum number of rounds
BANDWIDTH_WARMUP, BANDWIDTH_ROUNDS, BANDWIDTH_ITERS = 5, 15, 5
BANDWIDTH_MIN_ROUNDS, BANDWIDTH_BUDGET_S = 3, 3.0


def _bandwidth_calls(n: int, world: int, device: str) -> dict:
    """name -> (call, bytes) for ``n`` float32 elements per rank; bytes is the largest
    buffer, as nccl-tests counts it (the gathered output, the scattered input). Values start
    at 1/world; the in-place all_reduce multiplies its buffer by the world size with every call
    (inf after about 128 calls on two ranks, and inf stays inf): never a denormal, the one
    kind of value that slows float arithmetic."""
    fill = 1.0 / world
    buf = torch.full((n,), fill, dtype=torch.float32, device=device)
    big = torch.full((n * world,), fill, dtype=torch.float32, device=device)
    small = torch.full((n,), fill, dtype=torch.float32, device=device)
    source = big.clone()
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    # partials, not lambdas: the timed loop adds one C-level call per collective, the least a
    # loop over a given call can (benchmarks/dist_bandwidth.py measures it)
    return {
        "all_reduce": (partial(dist.all_reduce, buf), n * 4),
        "all_gather_into_tensor": (partial(gather, big, small), n * world * 4),
        "reduce_scatter_tensor": (partial(scatter, small, big), n * world * 4),
        "broadcast": (partial(dist.broadcast, buf, src=0), n * 4),
        "all_to_all_single": (partial(dist.all_to_all_single, big, source), n * world * 4),
    }


def _over_ranks(seconds: float, op, device: str) -> float:
    """``seconds`` of this rank reduced over the world by ``op`` (an all_reduce on the device,
    outside any timed region): every rank gets the same value back."""
    # float32: a device is never assumed to compute float64 (TPUs, Trainium, OpenReg do not);
    # seven significant digits of a time are more than its noise
    shared = torch.tensor([seconds], dtype=torch.float32)
    shared = shared.to(device) if device != "cpu" else shared
    dist.all_reduce(shared, op=op)
    return float(shared.to("cpu"))


def collective_round(fn, *, device: str, sync, iters: int) -> float:
    """One timed round of nccl-tests' loop: a barrier, a device synchronisation, the clock,
    ``iters`` calls, a device synchronisation, the clock. Returns the per-call seconds averaged
    over the ranks, as nccl-tests reports them by default (its ``-a 1``): each rank's time
    goes through an all_reduce outside the timed region. Nothing else runs between the two
    clock reads: no barrier or synchronisation per call, no clock read per call."""
    dist.barrier()
    sync()
    start = clock()
    for _ in range(iters):
        fn()
    sync()
    elapsed = (clock() - start) / iters
    # SUM over the world: AVG is not offered by every backend
    return _over_ranks(elapsed, dist.ReduceOp.SUM, device) / dist.get_world_size()


def warm_up(fn, *, device: str, sync, warmup: int, budget_s: float) -> int:
    """``warmup`` calls, or one when ``warmup`` of them would take more than ``budget_s``:
    judged from the first call's slowest-rank time, so every rank makes the same calls.
    Returns the calls made."""
    started = clock()
    fn()
    sync()
    if _over_ranks(clock() - started, dist.ReduceOp.MAX, device) * warmup > budget_s:
        return 1
    for _ in range(warmup - 1):
        fn()
    sync()
    return warmup


def time_collective(
    fn,
    *,
    device: str,
    sync,
    rounds: int,
    iters: int,
    warmup: int,
    min_rounds: int = BANDWIDTH_MIN_ROUNDS,
    budget_s: float = BANDWIDTH_BUDGET_S,
) -> list[float]:
    """nccl-tests' loop, in rounds: ``warm_up``, then up to ``rounds`` of ``collective_round``
    (per-call time, mean over the ranks). Python's garbage collector is kept out of the timed
    calls (as ``timing.sample_interleaved`` does). After ``min_rounds``, the rounds stop once
    the timed calls took ``budget_s``: every rank decides from the same shared times, so all
    stop at the same round."""
    warm_up(fn, device=device, sync=sync, warmup=warmup, budget_s=budget_s)
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            samples.append(collective_round(fn, device=device, sync=sync, iters=iters))
            if len(samples) >= min_rounds and sum(samples) * iters >= budget_s:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def bandwidth(
    *,
    world: int,
    device: str,
    sizes,
    sync,
    progress,
    rounds: int = BANDWIDTH_ROUNDS,
    iters: int = BANDWIDTH_ITERS,
    warmup: int = BANDWIDTH_WARMUP,
) -> list[dict]:
    """Per collective and size, timed on its own as nccl-tests does (``time_collective``):
    the median and p10/p90 of the per-call time over the rounds (``samples``: how many),
    algbw and busbw in GB/s (10^9 bytes/s, as nccl-tests)."""
    rows: list[dict] = []
    for n in sizes:
        calls = _bandwidth_calls(n, world, device)
        for name, (fn, nbytes) in calls.items():
            progress(f"{name} n={n} (bandwidth: {warmup} + up to {rounds} x {iters} calls)")
            summary = Summary.of(
                time_collective(
                    fn, device=device, sync=sync, rounds=rounds, iters=iters, warmup=warmup
                )
            )
            algbw = nbytes / summary.median_s / 1e9
            rows.append(
                {
                    "collective": name,
                    "dtype": "float32",
                    "size": n,
                    "bytes": nbytes,
                    "time_s": summary.median_s,
                    "time_p10_s": summary.p10_s,
                    "time_p90_s": summary.p90_s,
                    "spread": summary.spread,
                    "samples": summary.n,
                    "iters": iters,
                    "warmup": warmup,
                    "over_ranks": "mean",  # nccl-tests' -a 1 (rows without it: slowest rank)
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * BUS_FACTORS[name](world),
                }
            )
    return rows


def host_staging(*, world: int, device: str, progress, n: int = 1024, guard=None) -> list[dict]:
    """Collectives whose device tensors are copied to host memory while they run: each
    collective once (float32, ``n`` elements per rank) under a dispatch recorder that counts
    device→host copies (``_to_copy`` / ``copy_`` with a ``device`` source and a CPU result).

    Evidence class (d) of the placement probe (host work nested inside a device operation):
    a copy the dispatcher sees. A backend whose copies happen below c10d's own ops (in C++,
    inside ``c10d::allreduce_``) is not seen by a dispatch recorder; none found is "no copy the
    dispatcher saw", never "on the device"."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    device_type = torch.device(device).type
    copies = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}

    class DeviceToHost(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in copies:
                inputs = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
                source = inputs[-1] if func is torch.ops.aten.copy_.default else inputs[0]
                if source.device.type == device_type and any(
                    isinstance(o, torch.Tensor) and o.device.type == "cpu" for o in tree_leaves(out)
                ):
                    self.count += 1
            return out

    rows = []
    for name, (fn, nbytes) in _bandwidth_calls(n, world, device).items():
        label = f"{name} host-staging check n={n}"
        progress(label)
        recorder = DeviceToHost()
        with guard(label) if guard else contextlib.nullcontext(), recorder:
            fn()
        rows.append(
            {
                "collective": name,
                "bytes": nbytes,
                "device_to_host_copies": recorder.count,
                "evidence": "d",
                "staged_through_host": recorder.count > 0,
            }
        )
    return rows
