"""Profile per (case, mode): where a step's time goes, the top op, and the trace file."""

from __future__ import annotations

from torchport.views.base import Share, View, columns

PARTS = ("device_compute", "copies", "communication", "host", "idle")
COLUMNS = columns(
    "case",
    "mode",
    ("wall ms", "ms"),
    ("device compute", "ms"),
    ("copies", "ms"),
    ("communication", "ms"),
    ("host", "ms"),
    ("idle", "ms"),
    "top op",
    ("self ms", "ms"),
    "trace",
)


def build(run: dict, results: list[dict]) -> View | None:
    profiled = [r for r in results if "trace" in ((r.get("findings") or {}).get("profile") or {})]
    if not profiled:
        return None
    rows, notes = [], []
    for r in profiled:
        info = r["findings"]["profile"]
        parts = info.get("breakdown_ms") or {}
        wall = info.get("wall_ms") or 0.0
        shares = [None if parts.get(p) is None else Share(parts[p], wall) for p in PARTS]
        top = (info.get("top_ops") or [{}])[0]
        rows.append(
            [r["case"], r["mode"], wall, *shares, top.get("op"), top.get("self_ms"), info["trace"]]
        )
    hostside = [
        f"{r['case']} [{r['mode']}]"
        for r in profiled
        if not r["findings"]["profile"].get("device_timeline")
    ]
    if hostside:
        which = "all" if len(hostside) == len(profiled) else ", ".join(hostside)
        notes.append(
            f"no device timeline ({which}): device compute is the time inside aten "
            "operators and compiled graphs (the CPU kernels)"
        )
    notes.insert(
        0,
        "ms over the profiled steps; parts do not overlap and add up to the "
        "profiled window; traces open in https://ui.perfetto.dev",
    )
    return View("Profile", COLUMNS, rows, notes)
