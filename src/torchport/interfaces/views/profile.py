"""Profile per (case, mode): where a step's time goes, the top op, and the trace file."""


def build(run, results):
    profiled = [r for r in results if "trace" in ((r.get("findings") or {}).get("profile") or {})]
    if not profiled:
        return None
    rows, notes = [], []
    for r in profiled:
        info = r["findings"]["profile"]
        parts = info.get("breakdown_ms") or {}
        wall = info.get("wall_ms") or 0.0

        def share(name):
            ms = parts.get(name)
            return "-" if ms is None else (f"{ms:.3g} ({ms / wall:.0%})" if wall else f"{ms:.3g}")
        top = (info.get("top_ops") or [{}])[0]
        op = top.get("op", "-")
        op = op if len(op) <= 40 else op[:39] + "…"
        rows.append([r["case"], r["mode"], f"{wall:.3g}", share("device_compute"),
                     share("copies"), share("communication"), share("host"), share("idle"),
                     f"{op} {top.get('self_ms', 0):.3g}", info["trace"]])
    hostside = [f"{r['case']} [{r['mode']}]" for r in profiled
                if not r["findings"]["profile"].get("device_timeline")]
    if hostside:
        which = "all" if len(hostside) == len(profiled) else ", ".join(hostside)
        notes.append(f"no device timeline ({which}): device compute is the time inside aten "
                     "operators and compiled graphs (the CPU kernels)")
    notes.insert(0, "ms over the profiled steps; parts do not overlap and add up to the "
                    "profiled window; traces open in https://ui.perfetto.dev")
    return {"title": "Profile", "columns": ["case", "mode", "wall ms", "device compute",
                                            "copies", "communication", "host", "idle",
                                            "top op (self ms)", "trace"],
            "rows": rows, "notes": notes}
