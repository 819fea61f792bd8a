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


def _interleaved_eager(measured: list[dict]) -> dict[str, tuple[dict, list | None]]:
    """case -> (the compile task's eager side, why it is noisy) where that task timed eager in
    the same interleaved rounds as compiled (``findings.perf.sides.eager``)."""
    found = {}
    for r in measured:
        info = (r.get("findings") or {}).get("perf") or {}
        side = (info.get("sides") or {}).get("eager") or {}
        if r["mode"] == "compile" and side.get("median_ms"):
            found[r["case"]] = (side, (info.get("noisy") or {}).get("eager"))
    return found


def _scaled(cell, factor: float):
    """A rate cell (tokens/s, TFLOP/s, MFU: each inversely proportional to the step time) at
    another step time; text (``no peak``) stays."""
    if isinstance(cell, Annotated) and isinstance(cell.value, (int, float)):
        return Annotated(cell.value * factor, cell.note)
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return cell * factor
    return cell


def _eager_from_compile_rounds(measured: list[dict], rows: list[list]) -> list[str]:
    """The eager row of a case that was also compiled shows the eager side of the compile
    task's interleaved rounds (median, p10-p90, CV, n, and the rates at that median), so the
    eager and compiled rows side by side are one measurement and never contradict; the eager
    task's own figures stay in its record. Returns, per case whose two eager measurements
    disagree, a note with the one not shown."""
    rounds = _interleaved_eager(measured)
    said = []
    for r, cells in zip(measured, rows, strict=True):
        if r["mode"] != "eager" or r["case"] not in rounds:
            continue
        side, why = rounds[r["case"]]
        own = cells[2]
        factor = own / side["median_ms"] if isinstance(own, (int, float)) and own else None
        cells[2] = Annotated(side["median_ms"], "interleaved with compiled")
        has_span = side.get("p10_ms") is not None and side.get("p90_ms") is not None
        cells[3] = Span(side["p10_ms"], side["p90_ms"]) if has_span else None
        cells[4], cells[5] = side.get("cv"), side.get("n")
        for i in (6, 7, 8):
            cells[i] = _scaled(cells[i], factor) if factor is not None else None
        cells[11] = f"eager {', '.join(why)}" if why else None
        m = r.get("metrics") or {}
        low, high = m.get("perf_p10_ms"), m.get("perf_p90_ms")
        if own is not None and not (
            low is not None and high is not None and low <= side["median_ms"] <= high
        ):
            spread = f", p10-p90 {low:.3g}-{high:.3g}" if low is not None and high else ""
            said.append(
                f"{r['case']}: the eager row shows the eager rounds interleaved with compiled "
                f"({side['median_ms']:.3g} ms); the eager task's own measurement ({own:.3g} ms"
                f"{spread}) disagrees with them (the machine changed between the two tasks) "
                "and is kept in its record, not shown as a row"
            )
    return said


def _disagreeing(measured: list[dict]) -> dict[str, tuple[dict, float]]:
    """case -> (its eager row's metrics, the compile task's eager median) where the latter lies
    outside the eager row's p10-p90 and the compile task recorded only that median (a record
    from before the eager side was kept whole)."""
    eager = {r["case"]: r.get("metrics") or {} for r in measured if r["mode"] == "eager"}
    whole = _interleaved_eager(measured)
    found = {}
    for r in measured:
        source = ((r.get("findings") or {}).get("perf") or {}).get("speedup_from") or {}
        m = eager.get(r["case"])
        there = source.get("eager_median_ms")
        if r["mode"] != "compile" or m is None or there is None or r["case"] in whole:
            continue
        low, high = m.get("perf_p10_ms"), m.get("perf_p90_ms")
        if low is None or high is None or low <= there <= high:
            continue
        found[r["case"]] = (m, there)
    return found


def disagreements(measured: list[dict]) -> list[str]:
    """A case whose eager row and whose compile row's eager median disagree, in records that
    kept only that median: said, with both figures, so the two rows are never read as one
    measurement."""
    return [
        f"{case}: the eager row ({m.get('perf_median_ms', 0):.3g} ms, p10-p90 "
        f"{m['perf_p10_ms']:.3g}-{m['perf_p90_ms']:.3g}) and the eager rounds beside the "
        f"compiled ones ({there:.3g} ms) are two measurements that disagree (the machine "
        "changed between them); the speedup uses the latter"
        for case, (m, there) in _disagreeing(measured).items()
    ]


def _label_own_task(measured: list[dict], rows: list[list]) -> None:
    """In records that kept only the compile task's eager median: an eager row that disagrees
    with it says, in its median cell, that it is a task of its own and what the compile task's
    eager rounds gave."""
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
    replaced = _eager_from_compile_rounds(measured, rows)
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
            "interleaved rounds (in brackets)"
            + (
                "; an eager row marked 'interleaved with compiled' shows those same eager rounds"
                if any(
                    r["mode"] == "eager" and r["case"] in _interleaved_eager(measured)
                    for r in measured
                )
                else "; the eager row is a separate measurement"
            )
        )
    notes += replaced
    notes += disagreements(measured)
    if any(r[8] == NO_PEAK for r in rows):
        notes.append(
            "MFU needs the device's peak: none is known for this device; pass --peak-tflops"
        )
    if any(str(i.get("peak_bytes_is") or "").startswith("peak resident") for i in infos):
        notes.append("peak memory on the CPU is the worker process's peak resident set")
    peak_by = sorted({str(i["peak_bytes_by"]) for i in infos if i.get("peak_bytes_by")})
    if peak_by:
        notes.append("peak memory read with " + ", ".join(peak_by))
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
