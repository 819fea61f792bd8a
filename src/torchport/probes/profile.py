"""Profile (--profile): where the time of a step goes, from a torch.profiler trace.

A few steps of this mode's runner at the case's perf size are profiled (with the device's own
activity: CUDA, XPU, or PrivateUse1 where the backend is one); the Chrome trace is kept as an
artifact (opens in Perfetto / chrome://tracing). From the trace, the profiled window is split
into parts that never overlap, in this order of precedence:

  device compute  device kernels (on the CPU, or a backend without a device timeline: time
                  inside aten operators and compiled graphs, i.e. the CPU kernels)
  communication   collective kernels / ops (nccl, gloo, c10d) not hidden under compute
  copies          host<->device memory copies not hidden under the above
  host            the host busy (Python, dispatch, launches) while the device waits
  idle            nothing recorded on either side

so the parts add up to the window, whose length is checked against the clock's measurement.
"""

from __future__ import annotations

import json
import math
import os
import re
import uuid

from torchport.probes.base import Probe, ProbeReport, Subject
from torchport.timing import timed

PROBE_VERSION = 1
STEPS = 3
MAX_STEPS = 200
MIN_WINDOW_S = 0.1
WINDOW, STEP = "torchport_profiled_steps", "torchport_step"
COMM = re.compile(
    r"nccl|gloo|c10d::|all_reduce|allreduce|all_gather|reduce_scatter|all_to_all", re.IGNORECASE
)
# Inductor wraps a compiled graph's call in a record_function of this name: on the CPU its
# generated kernels run inside it, not as aten operators.
COMPILED_GRAPH = re.compile(r"CompiledFxGraph")
DEVICE_ACTIVITY = {"cuda": "CUDA", "xpu": "XPU", "hpu": "HPU", "mtia": "MTIA"}
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
PARTS = ("device_compute", "communication", "copies", "host", "idle")


def activities(device_type: str) -> tuple[list, list[str]]:
    """Profiler activities for a device type: CPU plus the device's own, where torch has it."""
    import torch
    from torch.profiler import ProfilerActivity

    chosen, notes = [ProfilerActivity.CPU], []
    name = DEVICE_ACTIVITY.get(device_type)
    if name is None and device_type != "cpu":
        try:
            if torch._C._get_privateuse1_backend_name() == device_type:  # private: guarded
                name = "PrivateUse1"
        except AttributeError:
            notes.append("cannot tell whether the device is a PrivateUse1 backend")
    if name is not None:
        activity = getattr(ProfilerActivity, name, None)
        if activity is None:
            notes.append(f"this torch has no ProfilerActivity.{name}: host activity only")
        else:
            chosen.append(activity)
    return chosen, notes


def profile_steps(step, sync, acts, steps: int = STEPS):
    """Profile ``steps`` calls of ``step`` inside one window; return (profiler, wall seconds)."""
    from torch.profiler import profile, record_function

    def window():
        with record_function(WINDOW):
            for _ in range(steps):
                with record_function(STEP):
                    step()
            sync()  # the window closes when the device has finished

    with profile(activities=acts) as prof:
        _, wall_s = timed(window, sync)
    return prof, wall_s


def _union_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals."""
    total, cur_start, cur_end = 0.0, 0.0, None  # cur_start is read only once cur_end is set
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def breakdown(events: list[dict]) -> dict:
    """Split the profiled window of a Chrome trace into non-overlapping parts, in ms."""
    window = next(
        e
        for e in events
        if e.get("ph") == "X" and e.get("name") == WINDOW and e.get("cat") == "user_annotation"
    )
    w0, w1 = window["ts"], window["ts"] + window["dur"]
    # "Trace" is the profiler's own span of everything, and gpu_user_annotation mirrors our
    # annotations on the device's rows: neither is activity.
    spans = [
        e
        for e in events
        if e.get("ph") == "X"
        and e is not window
        and "dur" in e
        and e.get("cat") not in ("Trace", "gpu_user_annotation")
    ]
    device_events = [e for e in spans if e.get("cat") in DEVICE_CATEGORIES]
    has_device_timeline = bool(device_events)

    def clip(es):
        return [
            (max(e["ts"], w0), min(e["ts"] + e["dur"], w1))
            for e in es
            if e["ts"] < w1 and e["ts"] + e["dur"] > w0
        ]

    if has_device_timeline:
        compute = [
            e for e in device_events if e["cat"] != "gpu_memcpy" and not COMM.search(e["name"])
        ]
        comm = [e for e in device_events if COMM.search(e["name"])]
        copies = [e for e in device_events if e["cat"] == "gpu_memcpy"]
        host = [e for e in spans if e.get("cat") not in DEVICE_CATEGORIES]
    else:  # the CPU is the device: its kernels are the aten operators
        ops = [e for e in spans if e.get("cat") == "cpu_op"]
        compute = [
            e
            for e in ops
            if (e["name"].startswith("aten::") or COMPILED_GRAPH.search(e["name"]))
            and not COMM.search(e["name"])
        ]
        comm = [e for e in ops if COMM.search(e["name"])]
        copies = []
        host = spans
    layers = [clip(compute), clip(comm), clip(copies), clip(host)]
    parts, covered, so_far = {}, [], 0.0
    for name, layer in zip(PARTS, layers, strict=False):
        covered += layer
        total = _union_us(covered)
        parts[name] = (total - so_far) / 1e3
        so_far = total
    parts["idle"] = (w1 - w0 - so_far) / 1e3
    return {"window_ms": (w1 - w0) / 1e3, "parts_ms": parts, "device_timeline": has_device_timeline}


def top_ops(prof, device_timeline: bool, n: int = 10) -> list[dict]:
    """The n ops with the most self time on the device (on the CPU when there is no device)."""
    attr = "self_device_time_total" if device_timeline else "self_cpu_time_total"
    rows = []
    for avg in prof.key_averages():
        # Operators only: device kernels appear as entries of their own (and their time is
        # already in the self device time of the operator that launched them).
        on_host = getattr(getattr(avg, "device_type", None), "name", "CPU") == "CPU"
        if avg.key.startswith("torchport_") or not on_host:
            continue
        self_us = getattr(avg, attr, None)
        if self_us is None and device_timeline:  # older torch names
            self_us = getattr(avg, "self_cuda_time_total", 0)
        rows.append(
            {
                "op": avg.key,
                "calls": avg.count,
                "self_ms": (self_us or 0) / 1e3,
                "host_total_ms": avg.cpu_time_total / 1e3,
            }
        )
    rows.sort(key=lambda r: r["self_ms"], reverse=True)
    return rows[:n]


def trace_path(config, subject: Subject) -> str:
    """An absolute, run-independent unique file name under the artifacts folder."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", subject.case.id)
    folder = os.path.abspath(config.artifacts_dir)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"profile-{slug}-{subject.mode}-{uuid.uuid4().hex[:12]}.json")


class ProfileProbe(Probe):
    name = "profile"
    version = PROBE_VERSION
    observes = True  # torch.profiler around the step: run after the timing probes

    def applies(self, subject: Subject) -> bool:
        return bool(subject.config.profile)

    def run(self, subject: Subject) -> ProbeReport:
        from torchport.probes.perf import first_calls, perf_setup

        report = ProbeReport()
        setup = perf_setup(subject)
        acts, notes = activities(subject.adapter.torch_type)
        info = {
            "steps": STEPS,
            "activities": [a.name for a in acts],
            "notes": notes,
            "size": setup.size,
        }
        report.findings["profile"] = info
        failed = first_calls(setup)
        step = setup.sides.get(setup.mode_side)
        if step is None:
            notes.append(f"nothing to profile: {failed}")
            return report
        # One more warm-up call (allocator and caches settle), timed to size the window: enough
        # steps to fill MIN_WINDOW_S, so the profiler's own enter/exit cost stays small in it.
        _, step_s = timed(step, subject.adapter.synchronize)
        steps = max(STEPS, min(MAX_STEPS, math.ceil(MIN_WINDOW_S / max(step_s, 1e-6))))
        info["steps"] = steps
        prof, wall_s = profile_steps(step, subject.adapter.synchronize, acts, steps)
        path = trace_path(subject.config, subject)
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        split = breakdown(events)
        if not split["device_timeline"]:
            notes.append(
                "no device timeline in the trace: device compute is the time inside "
                "aten operators and compiled graphs (the CPU kernels), host is the time "
                "between them"
            )
        info.update(
            trace=path,
            wall_ms=wall_s * 1e3,
            window_ms=split["window_ms"],
            breakdown_ms=split["parts_ms"],
            device_timeline=split["device_timeline"],
            top_ops=top_ops(prof, split["device_timeline"]),
            top_ops_by="self device time" if split["device_timeline"] else "self CPU time",
        )
        report.artifacts.append(path)
        report.metrics["profile_wall_ms"] = wall_s * 1e3
        for part, ms in split["parts_ms"].items():
            report.metrics[f"profile_{part}_ms"] = ms
        return report
