"""Hot spots against the roofline (--probes hotspots): where a kernel would pay.

Three passes over the eager step (an instrument never shares the timed pass):
  1. FLOPs and bytes per aten op, one step under a dispatch mode (``roofline.op_costs``)
  2. self time per aten op over a few profiled steps (torch.profiler; device time where the
     device has a timeline, else CPU time inside the op), and the window's time per step:
     the shares' denominator, measured in the same pass under the same load
  3. the step's own time without the profiler, synchronised, median of a few (recorded)
Then per op: share of the step, achieved FLOP/s and bytes/s, arithmetic intensity, bound
(compute or memory, against the ridge of the peaks), the time a kernel at the roofline would
take, percent of roofline, and the time it would save: the ranking. Host fallbacks (the op's
inputs were on the host while the target is a device) are marked. The same per innermost
module (torch's ModuleTracker, backward included), its ops timed one by one, synchronised, in a
fourth, instrumented pass (the modules' shares are of that pass). Peaks come from
--peak-tflops/--peak-gbps, the datasheet table, or a measurement (``roofline.peaks``).

In compile mode the generated kernels are not aten ops: the probe profiles the eager step and
says so.
"""

from __future__ import annotations

import statistics

from torchport.instruments.roofline import op_costs, peaks
from torchport.probes.base import Probe, ProbeReport, Subject
from torchport.timing import timed

PROBE_VERSION = 1
PROFILED_STEPS = 3
TIMED_STEPS = 5
KEPT = 25


def profile_self_times(step, sync, device_type: str, steps: int) -> tuple[dict, str, float]:
    """{op: {"self_ms", "calls"}} per step, which clock it is, and the profiled window's
    milliseconds per step (the denominator of the shares: same pass, same load)."""
    from torch.profiler import profile

    from torchport.probes.profile import activities
    from torchport.timing import clock

    acts, _ = activities(device_type)
    with profile(activities=acts) as prof:
        sync()
        start = clock()
        for _ in range(steps):
            step()
        sync()
        window_ms = (clock() - start) * 1e3 / steps
    device = len(acts) > 1
    attr = "self_device_time_total" if device else "self_cpu_time_total"
    found: dict = {}
    for avg in prof.key_averages():
        on_host = getattr(getattr(avg, "device_type", None), "name", "CPU") == "CPU"
        if not avg.key.startswith("aten::") or not on_host:
            continue
        us = getattr(avg, attr, None) or 0.0
        row = found.setdefault(avg.key, {"self_ms": 0.0, "calls": 0})
        row["self_ms"] += us / 1e3 / steps
        row["calls"] += avg.count / steps
    clock_kind = "self device time" if device else "self CPU time inside the op"
    return found, clock_kind, window_ms


def rank(costs: dict, times: dict, step_ms: float, peak: dict) -> list[dict]:
    """Per-op rows ranked by the time a roofline kernel would save (ms per step)."""
    flops_s, bytes_s = peak["tflops"] * 1e12, peak["gbps"] * 1e9
    ridge = flops_s / bytes_s
    rows = []
    for op in sorted(set(costs) | set(times)):
        cost, t = costs.get(op, {}), times.get(op)
        if t is None or t["self_ms"] <= 0:
            continue
        seconds = t["self_ms"] / 1e3
        flops, nbytes = cost.get("flops", 0), cost.get("bytes")
        counted = op in costs
        roof_s = max(flops / flops_s, (nbytes or 0) / bytes_s) if counted else None
        intensity = flops / nbytes if counted and nbytes else None
        rows.append(
            {
                "op": op,
                "calls": cost.get("calls", t["calls"]),
                "self_ms": t["self_ms"],
                "share": t["self_ms"] / step_ms if step_ms > 0 else None,
                "flops": flops if counted else None,
                "bytes": nbytes if counted else None,
                "achieved_tflops": flops / seconds / 1e12 if counted else None,
                "achieved_gbps": nbytes / seconds / 1e9 if counted and nbytes else None,
                "intensity": intensity,
                "bound": _bound(counted, flops, nbytes, intensity, ridge),
                "roofline_ms": roof_s * 1e3 if roof_s is not None else None,
                "pct_of_roofline": roof_s / seconds if roof_s is not None else None,
                "saving_ms": (seconds - roof_s) * 1e3 if roof_s is not None else None,
                "host_fallback": bool(cost.get("host_calls")),
                "counted": counted,
            }
        )
    rows.sort(key=lambda r: (r["saving_ms"] is None, -(r["saving_ms"] or 0), -r["self_ms"]))
    return rows


def _bound(counted: bool, flops: int, nbytes: int | None, intensity, ridge: float) -> str | None:
    if not counted:
        return None
    if not flops and not nbytes:
        return "overhead"  # moves and computes nothing (a view): its time is dispatch
    return "compute" if intensity is not None and intensity >= ridge else "memory"


class HotspotsProbe(Probe):
    name = "hotspots"
    version = PROBE_VERSION

    def run(self, subject: Subject) -> ProbeReport:
        from torchport.execution.steps import make_step

        report = ProbeReport()
        info: dict = {"notes": []}
        report.findings["hotspots"] = info
        adapter, target = subject.adapter, subject.adapter.torch_type
        eager = make_step(subject.model, subject.model, subject.workload)
        if subject.mode != "eager":
            info["notes"].append(
                f"{subject.mode} mode: a compiled graph's kernels are not aten ops; the hot "
                "spots are those of the eager step"
            )
        eager()  # warm-up (allocator, lazy init), outside every pass
        peak = peaks(subject.config, adapter, subject.dtype)
        costs = op_costs(eager, target)
        times, clock_kind, step_ms = profile_self_times(
            eager, adapter.synchronize, target, PROFILED_STEPS
        )
        plain_ms = 1e3 * statistics.median(
            timed(eager, adapter.synchronize)[1] for _ in range(TIMED_STEPS)
        )
        rows = rank(costs, times, step_ms, peak)
        per_module: dict = {}
        op_costs(eager, target, modules=per_module, sync=adapter.synchronize)
        module_ms = sum(m.get("time_ms", 0.0) for m in per_module.values())
        module_rows = rank(
            per_module,
            {
                name: {"self_ms": m.get("time_ms", 0.0), "calls": m.get("calls", 0)}
                for name, m in per_module.items()
            },
            module_ms,
            peak,
        )
        info.update(
            peaks=peak,
            ridge_flops_per_byte=peak["tflops"] * 1e12 / (peak["gbps"] * 1e9),
            step_ms=step_ms,
            step_ms_unprofiled=plain_ms,
            op_time=clock_kind,
            ops=rows[:KEPT],
            ops_total=len(rows),
            uncounted_ops=sorted(r["op"] for r in rows if not r["counted"])[:20],
            modules=module_rows[:KEPT],
            modules_time="each op timed alone, synchronised, in an instrumented pass; shares "
            "of that pass's op time (innermost module, backward included; 'Global' is outside "
            "every module)",
        )
        info["notes"].append(
            "FLOPs: PyTorch's FLOP counter formulas (matmul, convolution, attention); "
            "element-wise ops count 0 FLOPs and are memory-bound by their bytes; bytes: each "
            "distinct tensor storage an op reads or writes, once per call"
        )
        report.metrics["hotspots_step_ms"] = plain_ms
        report.metrics["hotspots_peak_tflops"] = peak["tflops"]
        report.metrics["hotspots_peak_gbps"] = peak["gbps"]
        saving = sum(r["saving_ms"] or 0.0 for r in rows)
        report.metrics["hotspots_roofline_saving_ms"] = saving
        return report
