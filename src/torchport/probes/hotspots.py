"""Hot spots against the roofline (--probes hotspots): where a kernel would pay.

Passes over the eager step (an instrument never shares the timed pass), after a warm-up step:
  1. FLOPs and bytes per aten op, one step under a dispatch mode (``roofline.op_costs``), per op
     and per innermost module (torch's ModuleTracker, backward included)
  2. STEPS instrumented steps (every op call timed alone, the device synchronised around it,
     attributed to its innermost module), interleaved with STEPS plain steps: the modules'
     times and what the instrumentation costs (instrumented step / plain step, said)
  3. the op table: on the CPU device, the same calls regrouped per op (one measurement for
     both tables); on a device, each op call's device self time over PROFILED_STEPS profiled
     steps (torch.profiler), each profiled step's own time being the shares' denominator
On the CPU device the passes run at one intra-op thread and read the calling thread's CPU
clock: on a shared host, several threads make an op wait at the pool's barrier for a thread the
OS gave to another process (4-40 ms, measured; see _host_threads), which made a 64x64
projection a 20 ms hot spot; one thread's CPU time is the op's own work whatever the load.
Times are robust (``call_times``): a call's time is the lower quartile of its samples over the
steps, a row's the sum over its calls, its spread the p10-p90 of its share over resamples of
the steps; a row whose spread exceeds UNSTABLE_SPREAD is marked unstable. A self-check compares
structurally identical modules (same class, parameter shapes and own calls): their shares must
agree within IDENTICAL_FACTOR, else the profile is unstable and the finding says which modules
and by how much. Then per row: share, achieved FLOP/s and bytes/s, arithmetic intensity, bound
(compute or memory, against the ridge of the peaks), the time a kernel at the roofline would
take, percent of roofline, and the time it would save: the ranking. Host fallbacks (the op's
inputs were on the host while the target is a device) are marked. Peaks come from
--peak-tflops/--peak-gbps, the datasheet table, or a measurement (``roofline.peaks``).

In compile mode the generated kernels are not aten ops: the probe profiles the eager step and
says so.
"""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Iterator

from torchport.instruments.call_times import (
    CallRecorder,
    CallSamples,
    identical_groups,
    summarise,
)
from torchport.instruments.roofline import op_costs, peaks
from torchport.probes.base import Probe, ProbeReport, Subject
from torchport.timing import gc_paused, round_order, timed

PROBE_VERSION = 2
PROFILED_STEPS = 5  # on a device with a timeline: profiled steps of the op table
STEPS = 7  # instrumented steps, and plain steps interleaved with them
TIMED_STEPS = 3  # plain steps at the user's own thread count (the recorded step time)
KEPT = 25
# A row whose share's p10-p90 (over resamples of the steps) spans more than half of it is
# unstable: two such figures can differ by 1.5x from noise alone (docs/design.md rules 7, 12).
UNSTABLE_SPREAD = 0.5
IDENTICAL_FACTOR = 1.5  # identical modules' shares must agree within this factor
CHECKED_SHARE = 0.01  # identical modules below this share of the pass are not checked


def profile_calls(step, sync, device_type: str, steps: int) -> tuple[CallSamples, list, str]:
    """Each of ``steps`` steps profiled alone (torch.profiler): every aten op call's self time
    (device time where the device has a timeline, else CPU time inside the op), keyed by op and
    occurrence; each profiled step's own seconds (the shares' denominator: same pass, same
    load); which clock it is."""
    from torch.profiler import profile

    from torchport.probes.profile import activities
    from torchport.timing import clock

    acts, _ = activities(device_type)
    device = len(acts) > 1
    attr = "self_device_time_total" if device else "self_cpu_time_total"
    calls, windows_s = CallSamples(), []
    for _ in range(steps):
        with profile(activities=acts) as prof:
            sync()
            start = clock()
            step()
            sync()
            windows_s.append(clock() - start)
        found = []
        events = sorted(prof.events(), key=lambda e: e.time_range.start)
        for event in events:
            on_host = getattr(getattr(event, "device_type", None), "name", "CPU") == "CPU"
            if not event.name.startswith("aten::") or not on_host:
                continue
            us = getattr(event, attr, None)
            if us is None and device:  # torch before the device-neutral name
                us = getattr(event, "self_cuda_time_total", 0.0)
            found.append((event.name, event.name, (us or 0.0) / 1e6))
        calls.add_step(found)
    clock_kind = "self device time" if device else "self CPU time inside the op"
    return calls, windows_s, clock_kind


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
                "share": t.get("share", t["self_ms"] / step_ms if step_ms > 0 else None),
                "share_p10": t.get("share_p10"),
                "share_p90": t.get("share_p90"),
                "spread": t.get("spread"),
                "unstable": t.get("spread") is not None and t["spread"] > UNSTABLE_SPREAD,
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


def self_check(groups: list[list[str]], rows: dict[str, dict]) -> dict:
    """Identical modules' shares against each other: {"groups": [...], "stable", "reason"}.
    A group disagrees when its largest share is more than IDENTICAL_FACTOR times its smallest
    AND the two rows' p10-p90 intervals (bootstrap over the steps, ``summarise``) do not
    overlap: the check is for a bias between modules that do the same work (an attribution or
    position error), which shows in every resample; a reading the host's noise moved in a few
    steps overlaps its twin and is the row's own ``unstable`` mark's business (its spread).
    Groups whose largest share is under CHECKED_SHARE are listed but not judged (timer
    resolution and dispatch jitter dominate there). Measured at two CPU burners on 2 cores:
    LayerNorm rows at 1.0-1.4 % of the pass read up to 1.59x apart in one run of many
    (docs/probes/hotspots.md)."""
    checked, failed = [], []
    for names in groups:
        present = [n for n in names if n in rows]
        if len(present) < 2:
            continue
        shares = [rows[n]["share"] for n in present]
        low, high = min(shares), max(shares)
        ratio = high / low if low > 0 else float("inf")
        largest, smallest = present[shares.index(high)], present[shares.index(low)]
        judged = high >= CHECKED_SHARE
        apart = _apart(rows[largest], rows[smallest])
        entry = {
            "modules": present,
            "shares": shares,
            "ratio": ratio,
            "judged": judged,
            "apart": apart,
            "agree": (ratio <= IDENTICAL_FACTOR or not apart) if judged else None,
            "largest": largest,
            "smallest": smallest,
        }
        checked.append(entry)
        if judged and not entry["agree"]:
            failed.append(entry)
    reason = "; ".join(
        f"{len(e['modules'])} identical modules ({_short(e['modules'])}): {e['largest']} "
        f"measured {max(e['shares']):.1%} against {e['smallest']}'s {min(e['shares']):.1%} "
        f"({e['ratio']:.2f}x, more than {IDENTICAL_FACTOR}x, beyond both rows' p10-p90)"
        for e in failed
    )
    return {"groups": checked, "stable": not failed, "reason": reason}


def _apart(high: dict, low: dict) -> bool:
    """Whether ``high``'s share sits above ``low``'s beyond their resampling spread: its p10
    over the other's p90 (rows without the interval, e.g. a single step, count as apart)."""
    hi_p10, lo_p90 = high.get("share_p10"), low.get("share_p90")
    if hi_p10 is None or lo_p90 is None:
        return True
    return hi_p10 > lo_p90


def _short(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 2 else f"{names[0]} ... {names[-1]}"


def _host_load() -> str:
    try:
        load = os.getloadavg()[0]
    except OSError:
        return "host load average unknown"
    return f"host load average {load:.1f} on {os.cpu_count()} CPUs"


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
        load_before = _host_load()
        eager()  # warm-up (allocator, lazy init), outside every pass
        plain_ms = _plain_step_ms(eager, adapter.synchronize)  # the user's own thread count
        per_module: dict = {}
        costs = op_costs(eager, target, modules=per_module)  # also warms the dispatch path up
        with _host_threads(target) as threads:
            # at the passes' threads, and on the CPU by the clock the ops are read with
            peak = peaks(subject.config, adapter, subject.dtype, _op_clock(target))
            passes = _timed_passes(eager, adapter.synchronize, target)
        op_times = summarise(passes["op_calls"], passes["denominator_s"])
        rows = rank(costs, op_times, 0.0, peak)
        recorder = passes["recorder"]
        module_times = summarise(recorder.calls)
        module_rows = rank(per_module, module_times, 0.0, peak)
        groups = identical_groups(subject.model, recorder.signatures, list(module_times))
        check = self_check(groups, module_times)
        cost = passes["cost"]
        info.update(
            peaks=peak,
            ridge_flops_per_byte=peak["tflops"] * 1e12 / (peak["gbps"] * 1e9),
            step_ms=plain_ms,
            step_ms_unprofiled=plain_ms,
            cost=cost,
            op_time=passes["op_time"],
            share_of=passes["share_of"],
            ops=rows[:KEPT],
            ops_total=len(rows),
            uncounted_ops=sorted(r["op"] for r in rows if not r["counted"])[:20],
            modules=module_rows[:KEPT],
            modules_time=(
                f"{passes['module_time']}; each op call timed alone in {STEPS} instrumented "
                "steps, a call's time the lower quartile of its samples, a module's the sum of its "
                "calls'; shares of the pass's op time (innermost module, backward included; "
                "'Global' is outside every module); spread: p10-p90 of the share over "
                f"resamples of the steps / the share, unstable above {UNSTABLE_SPREAD:.0%}"
            ),
            self_check=check,
            stable=check["stable"],
            load=f"{threads}{load_before} before, {_host_load()} after",
        )
        info["notes"].append(f"{_cost_note(cost)}; {info['load']}")
        info["notes"].append(_check_note(check))
        info["notes"].append(
            "FLOPs: PyTorch's FLOP counter formulas (matmul, convolution, attention); "
            "element-wise ops count 0 FLOPs and are memory-bound by their bytes; bytes: each "
            "distinct tensor storage an op reads or writes, once per call"
        )
        report.metrics["hotspots_step_ms"] = plain_ms
        report.metrics["hotspots_instrumented_cost_x"] = cost["instrumented_x"]
        report.metrics["hotspots_peak_tflops"] = peak["tflops"]
        report.metrics["hotspots_peak_gbps"] = peak["gbps"]
        report.metrics["hotspots_unstable_rows"] = sum(
            bool(r["unstable"]) for r in rows[:KEPT] + module_rows[:KEPT]
        )
        judged = [g["ratio"] for g in check["groups"] if g["judged"]]
        if judged:
            report.metrics["hotspots_identical_max_ratio"] = max(judged)
        saving = sum(r["saving_ms"] or 0.0 for r in rows)
        report.metrics["hotspots_roofline_saving_ms"] = saving
        return report


def _plain_step_ms(step, sync) -> float:
    with gc_paused():
        return 1e3 * statistics.median(timed(step, sync)[1] for _ in range(TIMED_STEPS))


@contextlib.contextmanager
def _host_threads(target: str) -> Iterator[str]:
    """On the CPU device, one intra-op thread for the timed passes (restored after). With
    several, an op split across the threads waits at the pool's barrier for a thread the OS has
    given to another process: a scheduler slice, 4-40 ms, charged to whichever op is running.
    Measured on the project's 2-core host under other jobs' load: a (32, 64) x (64, 64) matmul
    timed 2 000 times had a median of 14.5 us and 20 calls over 5 ms (the longest 42 ms) with
    2 threads, none over 0.06 ms with 1; in reduced llama's instrumented pass the slowest calls
    were 64x64 projections' aten::mm at 40-70 ms, no garbage collection inside them. With one
    thread and the thread's CPU clock, four identical blocks' shares agree within 1.12x at
    load 15 on 2 CPUs, where wall-clock shares at 2 threads differed up to 6x."""
    if target != "cpu":
        yield ""
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield f"op times at 1 intra-op thread (the step's own: {before}); "
    finally:
        torch.set_num_threads(before)


def _op_clock(target: str):
    """The clock op calls are read with: the thread's CPU time on the CPU device, else the
    wall clock (None: timing's default)."""
    from torchport.timing import thread_clock

    return thread_clock if target == "cpu" else None


def _timed_passes(step, sync, target: str) -> dict:
    """The op and module passes, and what they cost against a plain step.

    CPU device: every call's CPU time on the calling thread (``timing.thread_clock``), in STEPS
    instrumented steps interleaved with STEPS plain ones; the op table regroups the same calls
    (docs/design.md rule 12: figures side by side from one measurement). A device: the
    profiler's device self time per call over PROFILED_STEPS steps (their own time is the op
    shares' denominator), and the modules' calls on the host clock, synchronised around each."""
    on_host = target == "cpu"
    recorder = CallRecorder(step, sync, clock=_op_clock(target))
    cost: dict = {"steps": STEPS}
    with gc_paused():
        if not on_host:
            op_calls, windows_s, op_time = profile_calls(step, sync, target, PROFILED_STEPS)
            cost["profiled_ms"] = statistics.median(windows_s) * 1e3
        plain_s, instrumented_s = [], []
        sides = {
            "plain": lambda: plain_s.append(timed(step, sync)[1]),
            "instrumented": lambda: instrumented_s.append(timed(recorder.record, sync)[1]),
        }
        for r in range(STEPS):  # interleaved: both sides see the same host load
            for side in round_order(list(sides), r):
                sides[side]()
    cost["plain_ms"] = statistics.median(plain_s) * 1e3
    cost["instrumented_ms"] = statistics.median(instrumented_s) * 1e3
    cost["instrumented_x"] = cost["instrumented_ms"] / cost["plain_ms"]
    if "profiled_ms" in cost:
        cost["profiled_x"] = cost["profiled_ms"] / cost["plain_ms"]
    if on_host:
        return {
            "recorder": recorder,
            "op_calls": recorder.calls.regroup(lambda key: key[1]),
            "denominator_s": None,
            "op_time": "CPU time of the op on the calling thread, one intra-op thread",
            "share_of": "the instrumented pass's op time (the same calls as the modules')",
            "module_time": "CPU time of each op on the calling thread, one intra-op thread",
            "cost": cost,
        }
    return {
        "recorder": recorder,
        "op_calls": op_calls,
        "denominator_s": windows_s,
        "op_time": op_time,
        "share_of": "the profiled step (each profiled step's own time)",
        "module_time": "host clock around each op, the device synchronised before and after",
        "cost": cost,
    }


def _cost_note(cost: dict) -> str:
    text = (
        f"cost of measuring: an instrumented step {cost['instrumented_ms']:.3g} ms against a "
        f"plain one {cost['plain_ms']:.3g} ms ({cost['instrumented_x']:.2g}x; medians of "
        f"{cost['steps']} each, interleaved, same threads)"
    )
    if "profiled_ms" in cost:
        text += f", a profiled step {cost['profiled_ms']:.3g} ms ({cost['profiled_x']:.2g}x)"
    return text


def _check_note(check: dict) -> str:
    judged = [g for g in check["groups"] if g["judged"]]
    if not check["stable"]:
        return f"profile UNSTABLE: {check['reason']}"
    if not judged:
        return (
            "self-check: no structurally identical modules above "
            f"{CHECKED_SHARE:.0%} of the pass to compare"
        )
    worst = max(g["ratio"] for g in judged)
    count = sum(len(g["modules"]) for g in judged)
    noisy = sum(g["ratio"] > IDENTICAL_FACTOR for g in judged)
    within = f" ({noisy} of them only within their p10-p90)" if noisy else ""
    return (
        f"self-check: {len(judged)} groups of structurally identical modules ({count} "
        f"modules) agree within {worst:.2f}x (limit {IDENTICAL_FACTOR}x){within}"
    )
