"""Roofline instruments: FLOPs and bytes per aten op of a step, and the device's peaks.

op_costs  one step under a dispatch mode: per aten op (overload packet), calls, FLOPs (PyTorch's
          FLOP counter's formulas: matmuls, convolutions, attention; element-wise work counts 0)
          and bytes (each distinct tensor storage read or written, once per call; an op whose
          outputs alias its inputs moves nothing), and whether it ran on the host while the
          target is another device (a host fallback)
peaks     peak FLOP/s and bytes/s, each from --peak-tflops / --peak-gbps, the datasheet table
          (devices/peaks.py), or a short measurement torchport makes itself: a square matmul
          and a large copy on the device, synchronised, best of a few (recorded as "measured")

A roofline kernel takes max(FLOPs / peak FLOP/s, bytes / peak bytes/s); an op is compute-bound
when its arithmetic intensity (FLOPs / byte) is at or above the ridge (peak FLOP/s / peak B/s).
"""

from __future__ import annotations

import collections
from collections.abc import Callable

MATMUL_N = 1024  # square matmul of the measured FLOP/s peak
COPY_BYTES = 64 * 2**20  # bytes copied for the measured bandwidth peak (read + write counted)
REPEATS = 10
PEAK_GBPS: list[tuple[str, float]] = [  # datasheet memory bandwidth, GB/s; first match wins
    ("h200", 4800.0),
    ("h100 pcie", 2000.0),
    ("h100", 3350.0),
    ("a100", 2039.0),
    ("mi300x", 5300.0),
    ("l4", 300.0),
]


def op_key(name: str) -> str:
    """'aten.mm.default' / 'aten::mm' -> 'aten::mm' (the profiler's spelling)."""
    name = name.replace("::", ".")
    parts = name.split(".")
    return f"{parts[0]}::{parts[1]}" if len(parts) >= 2 else name


def op_costs(
    step: Callable[[], object], target: str, modules: dict | None = None
) -> dict[str, dict]:
    """{op: {"calls", "flops", "bytes", "host_calls"}} over one call of ``step``.

    ``modules``: a dict to fill with the same per innermost module (torch's ModuleTracker,
    backward included). Nothing is timed here: the modules' times come from several
    instrumented steps (``call_times.CallRecorder``)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    tracker = _module_tracker() if modules is not None else None
    innermost = Innermost(tracker)

    try:
        from torch.utils.flop_counter import flop_registry  # semi-private: guarded
    except ImportError:
        flop_registry = {}
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)

    class Costs(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            row = table[op_key(str(func))]
            before = dict(row)
            row["calls"] += 1
            packet = func.overloadpacket
            if packet in flop_registry:
                try:
                    row["flops"] += int(flop_registry[packet](*args, **kwargs, out_val=out))
                except Exception:  # a formula that does not take these arguments: no count
                    row["flops_unknown"] += 1
            ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            seen = {_storage(t) for t in ins}
            moved = sum(_nbytes(t) for t in _distinct(ins))
            fresh = [t for t in outs if _storage(t) not in seen]
            if outs and not fresh and all(_storage(t) in seen for t in outs) and not _mutates(func):
                moved = 0  # a view: no data moves
            else:
                moved += sum(_nbytes(t) for t in _distinct(fresh))
            row["bytes"] += moved
            if target != "cpu" and any(t.device.type == "cpu" and t.dim() > 0 for t in ins):
                row["host_calls"] += 1
            if tracker is not None and modules is not None:
                owner = innermost()
                entry = modules.setdefault(owner, collections.Counter())
                for key, value in row.items():
                    entry[key] += value - before.get(key, 0)
            return out

    if tracker is None:
        with Costs():
            step()
    else:
        with tracker, Costs():
            step()
    if modules is not None:
        for name in list(modules):
            modules[name] = dict(modules[name])
    return {op: dict(counts) for op, counts in table.items()}


def _module_tracker():
    try:
        from torch.utils.module_tracker import ModuleTracker  # public since torch 2.4
    except ImportError:
        return None
    return ModuleTracker()


class Innermost:
    """The module an op call belongs to: the most recently entered of those ModuleTracker holds
    open. ModuleTracker keeps an unordered set, and in the backward a module can stay in it
    after its gradients are done (reduced llama: layer 1's attention was still open while
    layer 0's attention ran its backward). Picking the deepest name of the set then chose
    between two names of equal depth by the set's order, which follows Python's per-process
    string hashing: layer 0's attention read 44 % of the step in one run and 0.1 % in the
    next. Here names are kept in the order they appeared (several new at once: the deeper
    last), so the module entered last owns the call."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.order: list[str] = []

    def __call__(self) -> str:
        if self.tracker is None:
            return "Global"
        current = self.tracker.parents
        self.order = [n for n in self.order if n in current]
        known = set(self.order)
        fresh = [n for n in current if n not in known]
        self.order.extend(sorted(fresh, key=lambda n: (n.count("."), len(n), n)))
        name = "Global"
        for entry in self.order:
            if entry == "Global":
                continue
            # ModuleTracker names a module outside the model's tree by its bare class name
            # (transformers calls its attention function through one, 'Func', from every
            # layer): it is put under the module that called it, so layers stay apart
            name = entry if "." in entry or name == "Global" else f"{name}.{entry}"
        return name


def _mutates(func) -> bool:
    schema = getattr(func, "_schema", None)
    return bool(schema is not None and getattr(schema, "is_mutable", False))


def _storage(t) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # a tensor without storage (a wrapper subclass)
        return id(t)


def _nbytes(t) -> int:
    return t.numel() * t.element_size()


def _distinct(tensors: list) -> list:
    found: dict[int, object] = {}
    for t in tensors:
        found.setdefault(_storage(t), t)
    return list(found.values())


def measured_peaks(adapter, dtype, clock=None) -> dict:
    """{"tflops", "gbps", "tflops_from", "gbps_from"}: best of REPEATS synchronised runs of a
    matmul and a copy (the first of each warms up). ``clock``: the clock the ops being compared
    with the peaks were timed by (the hot spots on the CPU: the thread's CPU time; a peak on
    the wall clock of a loaded host reads below what the ops then achieve)."""
    import torch

    from torchport.timing import timed

    device = adapter.device()
    a = torch.randn(MATMUL_N, MATMUL_N, device=device, dtype=dtype)
    b = torch.randn(MATMUL_N, MATMUL_N, device=device, dtype=dtype)
    src = torch.empty(COPY_BYTES // 4, device=device, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    best_mm = best_copy = float("inf")
    for _ in range(REPEATS + 1):  # the first call of each warms up
        best_mm = min(best_mm, timed(lambda: a @ b, adapter.synchronize, clock)[1])
        best_copy = min(best_copy, timed(lambda: dst.copy_(src), adapter.synchronize, clock)[1])
    read = ""
    if clock is not None:
        from torchport.timing import thread_clock

        read = ", the thread's CPU time" if clock is thread_clock else ", the caller's clock"
    return {
        "tflops": 2 * MATMUL_N**3 / best_mm / 1e12,
        "gbps": 2 * COPY_BYTES / best_copy / 1e9,
        "tflops_from": f"measured: {MATMUL_N}x{MATMUL_N} matmul in "
        f"{str(dtype).split('.')[-1]}, best of {REPEATS}{read}",
        "gbps_from": f"measured: {COPY_BYTES // 2**20} MiB copy (read + write), best of "
        f"{REPEATS}{read}",
    }


def table_gbps(device_name: str) -> float | None:
    name = (device_name or "").lower()
    return next((gbps for key, gbps in PEAK_GBPS if key in name), None)


def peaks(config, adapter, dtype, clock=None) -> dict:
    """Peak TFLOP/s and GB/s with where each came from (flag, table, or measured; ``clock``:
    see ``measured_peaks``)."""
    from torchport.instruments.flops import peak_for

    dtype_name = str(dtype).split(".")[-1]
    tflops, how_flops = peak_for(config, adapter, dtype_name)
    if tflops is not None and how_flops.startswith("datasheet") and config.peak_tflops is None:
        how_flops = "datasheet table"
    gbps = getattr(config, "peak_gbps", None)
    how_bytes = "--peak-gbps" if gbps else ""
    if not gbps:
        try:
            gbps = table_gbps(adapter.device_info().get("device_name", ""))
        except Exception:
            gbps = None
        how_bytes = "datasheet table" if gbps else ""
    found: dict = {}
    if tflops is None or not gbps:
        found = measured_peaks(adapter, dtype, clock)
    if tflops is None:
        tflops, how_flops = found["tflops"], found["tflops_from"]
    if not gbps:
        gbps, how_bytes = found["gbps"], found["gbps_from"]
    return {"tflops": tflops, "gbps": gbps, "tflops_from": how_flops, "gbps_from": how_bytes}
