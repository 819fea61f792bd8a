"""Perf per (case, mode): step time and spread, throughput, FLOP/s, MFU, speedup, memory."""


def _num(value, fmt: str, missing: str = "-") -> str:
    return missing if value is None else format(value, fmt)


def _pct(fraction: float) -> str:
    """3 significant digits: a tiny model's 0.0021% must not read as 0.0%."""
    return f"{fraction * 100:.3g}%"


def _bytes(value) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024


def row(result: dict) -> list:
    m = result.get("metrics") or {}
    info = (result.get("findings") or {}).get("perf") or {}
    spread = (f"{m['perf_p10_ms']:.3g}-{m['perf_p90_ms']:.3g}"
              if "perf_p10_ms" in m and "perf_p90_ms" in m else "-")
    if "perf_mfu" in m:
        mfu = _pct(m["perf_mfu"])
    elif "perf_mfu_6nt" in m:
        mfu = _pct(m["perf_mfu_6nt"]) + " (6NT)"
    else:
        mfu = "no peak" if info.get("peak_tflops") is None else "-"
    return [result["case"], result["mode"], _num(m.get("perf_median_ms"), ".3g"), spread,
            _num(m.get("perf_cv"), ".1%"), _num(m.get("perf_samples"), "d"),
            _num(m.get("perf_tokens_per_s"), ",.0f"), _num(m.get("perf_achieved_tflops"), ".3g"),
            mfu, speedup_cell(m, info), _bytes(m.get("perf_peak_bytes"))]


def speedup_cell(m: dict, info: dict) -> str:
    """The speedup with the two medians it was computed from (this task's interleaved
    eager and compiled rounds), so it never reads against another row's eager median."""
    if "perf_speedup" not in m:
        return "-"
    source = info.get("speedup_from") or {}
    eager, compiled = source.get("eager_median_ms"), source.get("compiled_median_ms")
    if eager is None or compiled is None:
        eager, compiled = m.get("perf_eager_median_ms"), m.get("perf_compiled_median_ms")
    medians = f" ({eager:.3g} / {compiled:.3g} ms)" if eager and compiled else ""
    return f"{m['perf_speedup']:.2f}x{medians}"


def build(run, results):
    measured = [r for r in results if "perf" in (r.get("findings") or {})]
    if not measured:
        return None
    rows = [row(r) for r in measured]
    notes = []
    kinds = sorted({(r["findings"]["perf"].get("step_kind") or "?") for r in measured})
    notes.append("step: " + ", ".join(kinds) + "; times are per step at each case's perf size, "
                 "median and p10-p90 of n interleaved samples")
    timers = sorted({r["findings"]["perf"].get("timer") for r in measured} - {None})
    if timers:
        notes.append("timed with " + ", ".join(timers))
    if any(r["mode"] == "compile" and "perf_speedup" in (r.get("metrics") or {})
           for r in measured):
        notes.append("speedup = eager median / compiled median of the compile row's own "
                      "interleaved rounds (shown in brackets); the eager row is a separate "
                      "measurement")
    if any(r[8] == "no peak" for r in rows):
        notes.append("MFU needs the device's peak: none is known for this device; pass "
                     "--peak-tflops")
    if any(r["findings"]["perf"].get("peak_bytes_is", "").startswith("peak resident")
           for r in measured):
        notes.append("peak memory on the CPU is the worker process's peak resident set")
    missing = [f"{r['case']} [{r['mode']}]: {'; '.join(r['findings']['perf'].get('notes'))}"
               for r in measured if "perf_median_ms" not in (r.get("metrics") or {})]
    notes.extend(f"no step time for {m}" for m in missing)
    return {"title": "Performance", "columns": ["case", "mode", "median ms", "p10-p90 ms", "CV",
                                                "n", "tokens/s", "TFLOP/s", "MFU", "speedup",
                                                "peak mem"],
            "rows": rows, "notes": notes}
