"""Compile economics per case: cold, warm and eager-first waits, graphs, breaks, recompiles.

Reads ``findings["compile"]`` written by the compile probe (never imports torch).
"""

from __future__ import annotations

import statistics

COLUMNS = ["case", "cold", "warm", "eager", "graphs (ops)", "breaks", "recompiles", "status"]


def _secs(value) -> str:
    return f"{value:.2f} s" if isinstance(value, (int, float)) else "-"


def _unavailable(part: dict | None) -> str:
    status = (part or {}).get("status")
    if isinstance(status, str) and status.startswith("unavailable"):
        return status
    if status and status != "ok":
        return f"{status}" + (f" @{part['stage']}" if part.get("stage") else "")
    return "-"


def cold_cell(c: dict, limit) -> str:
    cold = c.get("cold") or {}
    if cold.get("status") == "compile_timeout":
        return f"> {limit:g} s (compile_timeout)" if limit else "compile_timeout"
    if cold.get("status") == "ok":
        return _secs(cold["first_step_s"])
    return _unavailable(cold)


def warm_cell(c: dict) -> str:
    warm = c.get("warm") or {}
    if warm.get("status") != "ok":
        return _unavailable(warm)
    cache = warm.get("cache") or {}
    hits = sum(cache.get(k, 0) for k in ("fxgraph_cache_hit", "autograd_cache_hit")) \
        if isinstance(cache, dict) else 0
    proof = f"{hits} hits" if c.get("warm_proven") else "not proven warm"
    return f"{_secs(warm['first_step_s'])} ({proof})"


def graphs_cell(cold: dict) -> str:
    graphs = cold.get("graphs")
    if not isinstance(graphs, list):
        count = cold.get("graph_count")
        return str(count) if count is not None else "-"
    ops = "+".join(str(g["ops"]) for g in graphs[:4]) + ("+..." if len(graphs) > 4 else "")
    return f"{len(graphs)} ({ops})" if graphs else "0"


def breaks_cell(c: dict) -> str:
    """Breaks met, and where the first distinct one is (reason and stack are in findings)."""
    breaks = c.get("graph_breaks")
    if breaks is None:
        return "-"
    if isinstance(breaks, str):
        return breaks
    if not breaks:
        return "0"
    first = breaks[0]["stack"]
    where = first[-1].split(" in ")[0].rsplit("/", 1)[-1] if isinstance(first, list) and \
        first else breaks[0]["reason"].splitlines()[0][:40]
    distinct = f", {len(breaks)} distinct" if len(breaks) > 1 else ""
    return f"{sum(b['count'] for b in breaks)}{distinct} @ {where}"


def recompiles_cell(c: dict) -> str:
    """Recompiles over the --shapes sizes per mode, and sizes where the limit forced eager."""
    shapes = c.get("shapes")
    if not shapes:
        return "-"
    if shapes.get("status") != "ok":
        return _unavailable(shapes)
    parts, studies = [], shapes.get("studies") or ()
    substituted = any(s.get("note") for s in studies)  # batch studied in place of a missing seq
    for study in studies:
        if "not_applicable" in study:
            if not substituted:
                parts.append(f"{study['dim']}: not applicable")
            continue
        modes = []
        for mode in ("static", "dynamic"):
            data = study.get(mode) or {}
            if "recompiles" not in data:
                modes.append(f"{mode} {data.get('status', '-')}")
                continue
            eager = data.get("eager_after_limit") or []
            modes.append(f"{mode} {data['recompiles']}" +
                         (f" (eager at {','.join(map(str, eager))})" if eager else ""))
        label = study["dim"] + (" (no seq)" if study.get("note") else "")
        parts.append(f"{label} {','.join(str(v) for v in study['values'])}: " +
                     ", ".join(modes))
    return "; ".join(parts) or "-"


def build(run, results):
    rows, colds, multi_graph, proven, warm_runs = [], [], 0, 0, 0
    config = run.get("config") or {}
    limit, probed = config.get("compile_timeout_s"), "compile" in (config.get("probes") or ())
    for r in results:
        c = (r.get("findings") or {}).get("compile")
        if r["mode"] != "compile":
            continue
        if not c:
            if not (probed and r.get("stage") == "compile"):
                continue
            # The ladder's own first compiled step was the cold one (a fresh worker with empty
            # caches) and it failed or ran past the limit: the probe had nothing to add.
            c = {"cold": {"status": r["status"], "stage": "compile"}}
        cold = c.get("cold") or {}
        if cold.get("status") == "ok":
            colds.append(cold["first_step_s"])
            if isinstance(cold.get("graph_count"), int) and cold["graph_count"] > 1:
                multi_graph += 1
        if (c.get("warm") or {}).get("status") == "ok":
            warm_runs += 1
            proven += bool(c.get("warm_proven"))
        rows.append([r["case"], cold_cell(c, c.get("compile_timeout_s") or limit),
                     warm_cell(c), _secs(cold.get("eager_first_step_s")), graphs_cell(cold),
                     breaks_cell(c), recompiles_cell(c), r["status"]])
    if not rows:
        return None
    notes = ["cold / warm: first compiled step (forward, and backward when the case trains) in a "
             "fresh process with empty caches / with the caches cold left; eager: first eager "
             "step; recompiles: frames recompiled after the first size of --shapes"]
    if colds:
        notes.append(f"cold compile: median {statistics.median(colds):.2f} s, max "
                     f"{max(colds):.2f} s over {len(colds)} / {len(rows)} cases")
        notes.append(f"{multi_graph} / {len(colds)} cases needed more than one graph")
    if warm_runs:
        notes.append(f"warm proven by cache hits (no misses) for {proven} / {warm_runs} cases")
    return {"title": "Compile economics", "columns": COLUMNS, "rows": rows, "notes": notes}
