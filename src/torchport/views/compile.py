"""Compile economics per case: cold, warm and eager-first waits, graphs, breaks, recompiles.

Reads ``findings["compile"]`` written by the compile probe (never imports torch).
"""

from __future__ import annotations

import statistics

from torchport.views.base import Annotated, Breaks, Exceeded, Graphs, View, columns

COLUMNS = columns(
    "case",
    ("cold", "s"),
    ("warm", "s"),
    ("eager", "s"),
    ("graphs (ops)", "count"),
    ("breaks", "count"),
    "recompiles",
    "status",
)


def _seconds(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _unavailable(part: dict | None) -> str | None:
    """Why a part has no figure: its status (and stage), or None when it says nothing."""
    part = part or {}
    status = part.get("status")
    if isinstance(status, str) and status.startswith("unavailable"):
        return status
    if status and status != "ok":
        return f"{status}" + (f" @{part['stage']}" if part.get("stage") else "")
    return None


def cold_cell(c: dict, limit):
    cold = c.get("cold") or {}
    if cold.get("status") == "compile_timeout":
        return Exceeded(limit if isinstance(limit, (int, float)) else None, "compile_timeout")
    if cold.get("status") == "ok":
        return _seconds(cold.get("first_step_s"))
    return _unavailable(cold)


def warm_cell(c: dict):
    warm = c.get("warm") or {}
    if warm.get("status") != "ok":
        return _unavailable(warm)
    cache = warm.get("cache") or {}
    hits = (
        sum(cache.get(k, 0) for k in ("fxgraph_cache_hit", "autograd_cache_hit"))
        if isinstance(cache, dict)
        else 0
    )
    proof = f"{hits} hits" if c.get("warm_proven") else "not proven warm"
    return Annotated(_seconds(warm.get("first_step_s")), proof)


def graphs_cell(cold: dict):
    graphs = cold.get("graphs")
    if not isinstance(graphs, list):
        count = cold.get("graph_count")
        return Graphs(count) if isinstance(count, int) else None
    return Graphs(len(graphs), [g.get("ops") for g in graphs])


def breaks_cell(c: dict):
    """Breaks met, and where the first distinct one is (reason and stack are in findings)."""
    breaks = c.get("graph_breaks")
    if breaks is None or isinstance(breaks, str):
        return breaks
    if not breaks:
        return 0
    first = breaks[0].get("stack")
    where = (
        first[-1].split(" in ")[0].rsplit("/", 1)[-1]
        if isinstance(first, list) and first
        else str(breaks[0].get("reason", "")).splitlines()[0][:40]
    )
    return Breaks(sum(b.get("count", 0) for b in breaks), len(breaks), where)


def recompiles_cell(c: dict) -> str | None:
    """Recompiles over the --shapes sizes per mode, and sizes where the limit forced eager."""
    shapes = c.get("shapes")
    if not shapes:
        return None
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
            modes.append(
                f"{mode} {data['recompiles']}"
                + (f" (eager at {','.join(map(str, eager))})" if eager else "")
            )
        label = study["dim"] + (" (no seq)" if study.get("note") else "")
        parts.append(f"{label} {','.join(str(v) for v in study['values'])}: " + ", ".join(modes))
    return "; ".join(parts) or None


def build(run: dict, results: list[dict]) -> View | None:
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
        if cold.get("status") == "ok" and _seconds(cold.get("first_step_s")) is not None:
            colds.append(cold["first_step_s"])
            if isinstance(cold.get("graph_count"), int) and cold["graph_count"] > 1:
                multi_graph += 1
        if (c.get("warm") or {}).get("status") == "ok":
            warm_runs += 1
            proven += bool(c.get("warm_proven"))
        rows.append(
            [
                r["case"],
                cold_cell(c, c.get("compile_timeout_s") or limit),
                warm_cell(c),
                _seconds(cold.get("eager_first_step_s")),
                graphs_cell(cold),
                breaks_cell(c),
                recompiles_cell(c),
                r["status"],
            ]
        )
    if not rows:
        return None
    notes = [
        "cold / warm: first compiled step (forward, and backward when the case trains) in a "
        "fresh process with empty caches / with the caches cold left; eager: first eager "
        "step; recompiles: frames recompiled after the first size of --shapes"
    ]
    if colds:
        notes.append(
            f"cold compile: median {statistics.median(colds):.2f} s, max "
            f"{max(colds):.2f} s over {len(colds)} / {len(rows)} cases"
        )
        notes.append(f"{multi_graph} / {len(colds)} cases needed more than one graph")
    if warm_runs:
        notes.append(f"warm proven by cache hits (no misses) for {proven} / {warm_runs} cases")
    return View("Compile economics", COLUMNS, rows, notes)
