"""Perf per (case, mode): step time and spread, throughput, FLOP/s, MFU, speedup, memory, and
which sides were too noisy to trust (the perf probe's limits on CV and sample count)."""

from __future__ import annotations

from torchport.views.base import Annotated, Span, View, columns

COLUMNS = columns(
    "case",
    "mode",
    ("median ms", "ms"),
    ("p10-p90 ms", "ms"),
    ("CV", "percent"),
    ("n", "count"),
    ("tokens/s", "rate"),
    ("TFLOP/s", "tflops"),
    ("MFU", "percent"),
    ("speedup", "ratio"),
    ("peak mem", "bytes"),
    "noisy",
)
NO_PEAK = "no peak"


def mfu(metrics: dict, info: dict):
    """MFU from counted FLOPs, else from the 6·N·T estimate (marked), else why there is none."""
    if "perf_mfu" in metrics:
        return metrics["perf_mfu"]
    if "perf_mfu_6nt" in metrics:
        return Annotated(metrics["perf_mfu_6nt"], "6NT")
    return NO_PEAK if info.get("peak_tflops") is None else None


def speedup(m: dict, info: dict):
    """The speedup with the two medians it was computed from (the compile task's own
    interleaved eager and compiled rounds), so it never reads against another row's median."""
    if "perf_speedup" not in m:
        return None
    source = info.get("speedup_from") or {}
    eager, compiled = source.get("eager_median_ms"), source.get("compiled_median_ms")
    if eager is None or compiled is None:
        eager, compiled = m.get("perf_eager_median_ms"), m.get("perf_compiled_median_ms")
    noisy = ", from a noisy side" if info.get("speedup_noisy") else ""
    if eager and compiled:
        return Annotated(m["perf_speedup"], f"{eager:.3g} / {compiled:.3g} ms{noisy}")
    return Annotated(m["perf_speedup"], noisy.removeprefix(", ")) if noisy else m["perf_speedup"]


def noisy(info: dict) -> str | None:
    """``eager CV 238% > 10%, n = 3 < 10``: the sides outside the probe's noise limits."""
    flagged = info.get("noisy") or {}
    return "; ".join(f"{side} {', '.join(why)}" for side, why in flagged.items()) or None


def row(result: dict) -> list:
    m = result.get("metrics") or {}
    info = (result.get("findings") or {}).get("perf") or {}
    spread = (
        Span(m["perf_p10_ms"], m["perf_p90_ms"])
        if "perf_p10_ms" in m and "perf_p90_ms" in m
        else None
    )
    return [
        result["case"],
        result["mode"],
        m.get("perf_median_ms"),
        spread,
        m.get("perf_cv"),
        m.get("perf_samples"),
        m.get("perf_tokens_per_s"),
        m.get("perf_achieved_tflops"),
        mfu(m, info),
        speedup(m, info),
        m.get("perf_peak_bytes"),
        noisy(info),
    ]


def _disagreeing(measured: list[dict]) -> dict[str, tuple[dict, float]]:
    """case -> (its eager row's metrics, the compile task's eager median) where the latter lies
    outside the eager row's p10-p90: two measurements of one thing that disagree."""
    eager = {r["case"]: r.get("metrics") or {} for r in measured if r["mode"] == "eager"}
    found = {}
    for r in measured:
        source = ((r.get("findings") or {}).get("perf") or {}).get("speedup_from") or {}
        m = eager.get(r["case"])
        there = source.get("eager_median_ms")
        if r["mode"] != "compile" or m is None or there is None:
            continue
        low, high = m.get("perf_p10_ms"), m.get("perf_p90_ms")
        if low is None or high is None or low <= there <= high:
            continue
        found[r["case"]] = (m, there)
    return found


def disagreements(measured: list[dict]) -> list[str]:
    """A case whose eager row and whose compile row's eager rounds disagree (the compile
    task's eager median outside the eager row's p10-p90): said, with both figures, so the two
    rows are never read as one measurement."""
    return [
        f"{case}: the eager row ({m.get('perf_median_ms', 0):.3g} ms, p10-p90 "
        f"{m['perf_p10_ms']:.3g}-{m['perf_p90_ms']:.3g}) and the eager rounds beside the "
        f"compiled ones ({there:.3g} ms) are two measurements that disagree (the machine "
        "changed between them); the speedup uses the latter"
        for case, (m, there) in _disagreeing(measured).items()
    ]


def _label_own_task(measured: list[dict], rows: list[list]) -> None:
    """An eager row that disagrees with its case's compile rounds says, in its median cell,
    that it is a task of its own and what the compile task's eager rounds gave: the table
    never shows two eager figures of one case as one measurement."""
    disagreeing = _disagreeing(measured)
    for r, cells in zip(measured, rows, strict=True):
        if r["mode"] == "eager" and r["case"] in disagreeing and cells[2] is not None:
            there = disagreeing[r["case"]][1]
            cells[2] = Annotated(cells[2], f"own task; {there:.3g} ms beside compiled")


def build(run: dict, results: list[dict]) -> View | None:
    measured = [r for r in results if "perf" in (r.get("findings") or {})]
    if not measured:
        return None
    rows = [row(r) for r in measured]
    _label_own_task(measured, rows)
    infos = [r["findings"]["perf"] or {} for r in measured]
    kinds = sorted({(i.get("step_kind") or "?") for i in infos})
    notes = [
        "step: " + ", ".join(kinds) + "; times are per step at each case's perf size, "
        "median and p10-p90 of n interleaved samples"
    ]
    timers = sorted({str(i["timer"]) for i in infos if i.get("timer")})
    if timers:
        notes.append("timed with " + ", ".join(timers))
    if any(r["mode"] == "compile" and "perf_speedup" in (r.get("metrics") or {}) for r in measured):
        notes.append(
            "speedup = eager median / compiled median of the compile row's own "
            "interleaved rounds (in brackets); the eager row is a separate measurement"
        )
    notes += disagreements(measured)
    if any(r[8] == NO_PEAK for r in rows):
        notes.append(
            "MFU needs the device's peak: none is known for this device; pass --peak-tflops"
        )
    if any(str(i.get("peak_bytes_is") or "").startswith("peak resident") for i in infos):
        notes.append("peak memory on the CPU is the worker process's peak resident set")
    loads = [
        (r, i["host_load"])
        for r, i in zip(measured, infos, strict=True)
        if i.get("noisy") and i.get("host_load")
    ]
    if loads:
        limits = infos[0].get("noise_limits") or {"max_cv": 0.1, "min_samples": 10}
        judged = (
            f"p10-p90 <= {limits['max_spread']:.0%} of the median"
            if "max_spread" in limits
            else f"CV <= {limits.get('max_cv', 0.1):.0%}"  # a record from before the spread
        )
        notes.append(
            f"noisy: outside {judged} and n >= {limits.get('min_samples', 10)}; host load then: "
            + ", ".join(
                f"{r['case']} ({r['mode']}) {load.get('load_avg_1min')} on "
                f"{load.get('cpu_count')} cores"
                for r, load in loads
            )
        )
    notes.extend(
        f"no step time for {r['case']} [{r['mode']}]: {'; '.join(i.get('notes') or ())}"
        for r, i in zip(measured, infos, strict=True)
        if "perf_median_ms" not in (r.get("metrics") or {})
    )
    return View("Performance", COLUMNS, rows, notes)
