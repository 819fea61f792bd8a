"""The GPU check's ``accel`` section: the standard accelerator API against the device's own.

One eager training step of the llama (``--shapes``' first, batch 4 x seq on a GPU; tiny on the
CPU), measured through three paths, interleaved round by round:

- ``torch.accelerator``: ``torch.accelerator.synchronize()``,
  ``torch.accelerator.memory.max_memory_allocated()`` (after ``reset_peak_memory_stats()``),
  and ``torch.Event(enable_timing=True)`` pairs around each step;
- the device's own module (``torch.cuda`` on a GPU): ``torch.cuda.synchronize()``,
  ``torch.cuda.max_memory_allocated()``, ``torch.cuda.Event``;
- torchport's device adapter, as every probe uses it (``adapter.synchronize``,
  ``adapter.peak_memory_bytes``, ``timing.step_timer``): whichever API it chose, as its
  ``sync_method`` says.

Per path: the step's time by its events (median, mean, p10-p90 of the same samples), the time
from launch to the return of its synchronise on the host clock (a synchronise that does not
wait shows here as a figure far below the events'), and the peak memory. Two paths agree when
their medians differ by no more than the wider robust spread (p10-p90) of the two, or 2 %, and
their peaks are equal. A call a torch lacks (2.11 on the device) is named, not guessed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from gpu_check_common import Report
from gpu_check_sections import SHAPES, compile_subject, llama_case

AGREE_FLOOR = 0.02  # medians within 2 % always agree, whatever the spread
MEMORY_CALLS = (
    ("reset_peak", "reset_peak_memory_stats"),
    ("max_allocated", "max_memory_allocated"),
)


@dataclass
class ApiPath:
    """One way of waiting on the device, reading its peak memory and timing a call."""

    name: str
    synchronize: object = None  # () -> None
    reset_peak: object = None  # () -> None
    max_allocated: object = None  # () -> int
    new_event: object = None  # () -> event with record(), synchronize(), elapsed_time(other)
    timer: object = None  # torchport's StepTimer (the adapter path): (fn) -> (value, seconds)
    missing: list = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.synchronize is not None


def _try_event(make, sync) -> tuple[object, str | None]:
    """``make`` if an event it makes can be recorded and timed here, else why not."""
    try:
        a, b = make(), make()
        a.record()
        b.record()
        b.synchronize()
        a.elapsed_time(b)
        sync()
        return make, None
    except Exception as exc:  # the API exists but this device cannot time with it
        return None, f"{type(exc).__name__}: {str(exc)[:120]}"


def accelerator_path(device_type: str) -> ApiPath:
    import torch

    path = ApiPath("torch.accelerator")
    acc_mod = getattr(torch, "accelerator", None)
    if acc_mod is None:
        path.missing.append("torch.accelerator (this torch has none)")
        return path
    try:
        current = acc_mod.current_accelerator()
    except Exception as exc:
        current, why = None, f"{type(exc).__name__}: {exc}"
    else:
        why = "torch.accelerator.current_accelerator() is None (no accelerator)"
    if current is None or current.type != device_type:
        path.missing.append(
            why if current is None else f"the current accelerator is {current.type}"
        )
        return path
    path.synchronize = getattr(acc_mod, "synchronize", None)
    if path.synchronize is None:
        path.missing.append("torch.accelerator.synchronize")
    memory = getattr(acc_mod, "memory", None)
    for attr, name in MEMORY_CALLS:
        fn = getattr(memory, name, None) if memory is not None else None
        setattr(path, attr, fn)
        if fn is None:
            path.missing.append(f"torch.accelerator.memory.{name}")
    if hasattr(torch, "Event"):
        path.new_event, why_not = _try_event(
            lambda: torch.Event(device=current, enable_timing=True),
            path.synchronize or (lambda: None),
        )
        if why_not:
            path.missing.append(f"torch.Event timing ({why_not})")
    else:
        path.missing.append("torch.Event")
    return path


def specific_path(device_type: str) -> ApiPath:
    import torch

    mod = getattr(torch, device_type, None)
    path = ApiPath(f"torch.{device_type}")
    if mod is None:
        path.missing.append(f"torch.{device_type}")
        return path
    for attr, name in (("synchronize", "synchronize"), *MEMORY_CALLS):
        fn = getattr(mod, name, None)
        setattr(path, attr, fn)
        if fn is None:
            path.missing.append(f"torch.{device_type}.{name}")
    event_cls = getattr(mod, "Event", None)
    if event_cls is None:
        path.missing.append(f"torch.{device_type}.Event")
    else:
        path.new_event, why_not = _try_event(
            lambda: event_cls(enable_timing=True), path.synchronize or (lambda: None)
        )
        if why_not:
            path.missing.append(f"torch.{device_type}.Event timing ({why_not})")
    return path


def adapter_path(adapter) -> ApiPath:
    from torchport.timing import step_timer

    timer = step_timer(adapter)
    return ApiPath(
        f"torchport adapter ({adapter.sync_method}; timer: {timer.kind})",
        synchronize=adapter.synchronize,
        reset_peak=adapter.reset_peak_memory,
        max_allocated=adapter.peak_memory_bytes,
        timer=timer,
    )


def sample(path: ApiPath, step) -> dict:
    """One sample of a path: the step timed by its events (or its timer), the host-clock time
    to the return of its synchronise, and the peak memory it reads."""
    path.synchronize()
    if path.reset_peak is not None:
        path.reset_peak()
    got: dict = {}
    if path.timer is not None:
        got["event_s"] = path.timer(step)[1]
    elif path.new_event is not None:
        start, end = path.new_event(), path.new_event()
        start.record()
        step()
        end.record()
        end.synchronize()
        got["event_s"] = start.elapsed_time(end) / 1e3  # elapsed_time is in ms
    path.synchronize()
    t0 = time.perf_counter()
    step()
    path.synchronize()
    got["host_sync_s"] = time.perf_counter() - t0
    if path.max_allocated is not None:
        got["peak_bytes"] = path.max_allocated()
    return got


def summarise(values: list[float]) -> dict | None:
    from torchport.timing import Summary

    if not values:
        return None
    s = Summary.of(values)
    return {
        "median_ms": s.median_s * 1e3,
        "mean_ms": s.mean_s * 1e3,
        "p10_ms": s.p10_s * 1e3,
        "p90_ms": s.p90_s * 1e3,
        "spread": s.spread,
        "n": s.n,
    }


def agree(a: dict | None, b: dict | None) -> tuple[bool | None, float | None]:
    """Whether two summaries' medians agree within noise, and their ratio."""
    if not a or not b:
        return None, None
    ratio = a["median_ms"] / b["median_ms"]
    allowed = max(AGREE_FLOOR, a["spread"], b["spread"])
    return abs(ratio - 1) <= allowed, ratio


def accel_section(args, report: Report) -> None:
    import torch

    from torchport.devices import get_adapter
    from torchport.probes.perf import perf_setup

    adapter = get_adapter(args.device)
    adapter.prepare()
    device_type = adapter.torch_type
    paths = [accelerator_path(device_type), specific_path(device_type), adapter_path(adapter)]
    for path in paths:
        report.add(
            f"  {path.name}: "
            + ("usable" if path.usable else "not usable")
            + (f"; missing: {'; '.join(path.missing)}" if path.missing else "")
        )
    usable = [p for p in paths if p.usable]
    batch, seq = (2, 32) if args.tiny else (4, args.seq)
    shape = SHAPES[args.shapes[0]]
    case = llama_case(args, batch, seq, str(adapter.device()), shape)
    step = perf_setup(compile_subject(args, case, adapter)).sides["eager"]
    report.stamp(
        f"accel: eager llama {shape.name} training step, batch {batch} x {seq}, paths "
        + ", ".join(p.name.split(" (")[0] for p in usable)
    )
    for _ in range(3):  # warm-up: allocator, kernels' first launches
        step()
    samples: dict[str, list[dict]] = {p.name: [] for p in usable}
    start, rounds = time.perf_counter(), 0
    budget = args.budget_s * max(1, len(usable))
    while rounds < 10 or (time.perf_counter() - start < budget and rounds < 200):
        order = usable if rounds % 2 == 0 else usable[::-1]  # interleaved, alternating order
        for path in order:
            samples[path.name].append(sample(path, step))
        rounds += 1
    figures = {}
    for path in usable:
        got = samples[path.name]
        peaks = sorted({g["peak_bytes"] for g in got if g.get("peak_bytes") is not None})
        figures[path.name] = {
            "event": summarise([g["event_s"] for g in got if "event_s" in g]),
            "host_sync": summarise([g["host_sync_s"] for g in got]),
            "peak_bytes": peaks,
            "missing": path.missing,
            "timed_by": "torchport's step timer" if path.timer is not None else "its events",
        }
    for name, f in figures.items():
        ev, hs = f["event"], f["host_sync"]
        report.add(
            f"  {name.split(' (')[0]}: "
            + (
                f"timed by {f['timed_by']}: median {ev['median_ms']:.4g} ms, mean "
                f"{ev['mean_ms']:.4g} (p10-p90 "
                f"{ev['p10_ms']:.4g}-{ev['p90_ms']:.4g}, n {ev['n']}); "
                if ev
                else "no events; "
            )
            + f"launch to synchronised return median {hs['median_ms']:.4g} ms; peak memory "
            + (", ".join(f"{b / 2**20:.1f} MiB" for b in f["peak_bytes"]) or "not read")
        )
    names = list(figures)
    verdicts = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            fa, fb = figures[a], figures[b]
            for what in ("event", "host_sync"):
                ok, ratio = agree(fa[what], fb[what])
                if ok is None:
                    continue
                verdicts.append(ok)
                report.add(
                    f"  {a.split(' (')[0]} / {b.split(' (')[0]} {what}: median ratio "
                    f"{ratio:.3f}: " + ("agree within noise" if ok else "DIFFER beyond noise")
                )
            if fa["peak_bytes"] and fb["peak_bytes"]:  # the same allocator's highest mark
                same = max(fa["peak_bytes"]) == max(fb["peak_bytes"])
                verdicts.append(same)
                report.add(
                    f"  {a.split(' (')[0]} / {b.split(' (')[0]} peak memory: "
                    + ("equal" if same else f"DIFFER ({fa['peak_bytes']} vs {fb['peak_bytes']})")
                )
    report.add(
        f"  accel: {sum(verdicts)} of {len(verdicts)} comparisons agree"
        + ("" if len(usable) > 1 else "; fewer than two usable paths: nothing to compare")
    )
    with open(os.path.join(args.out, "accel.json"), "w") as f:
        json.dump({"paths": figures, "agree": verdicts}, f, indent=1, default=str)
    del step
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
