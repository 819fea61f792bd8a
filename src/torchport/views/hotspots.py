"""Hot spots against the roofline (``--probes hotspots``): per aten op of each result, ranked
by the time a kernel at the roofline would save per step, and the same per module. Each share
has its spread (p10-p90 over resamples of the measured steps, over the share) and ``unstable``
where that spread is wide; the notes say what measuring cost and whether structurally
identical modules agreed (else: ``profile UNSTABLE`` and why)."""

from __future__ import annotations

from torchport.views.base import View, columns

COLUMNS = columns(
    "case",
    "mode",
    "op",
    ("calls", "count"),
    ("share", "percent"),
    ("spread", "percent"),
    "noise",
    ("self ms", "ms"),
    ("achieved TFLOP/s", "tflops"),
    ("GB/s", "sci"),
    ("FLOP/byte", "sci"),
    "bound",
    ("% of roofline", "percent"),
    ("saving ms", "ms"),
    "host fallback",
)
SHOWN = 12  # ops per result in the table (the JSON form of the result keeps more)


def build(run: dict, results: list[dict]) -> View | None:
    found = [r for r in results if (r.get("findings") or {}).get("hotspots")]
    if not found:
        return None
    rows: list[list] = []
    notes: list[str] = []
    for r in found:
        info = r["findings"]["hotspots"]
        peak = info.get("peaks") or {}
        notes.append(
            f"{r['case']} [{r['mode']}]: step {info.get('step_ms', 0):.3g} ms; peaks "
            f"{peak.get('tflops', 0):.3g} TFLOP/s ({peak.get('tflops_from')}), "
            f"{peak.get('gbps', 0):.3g} GB/s ({peak.get('gbps_from')}); ridge "
            f"{info.get('ridge_flops_per_byte', 0):.3g} FLOP/byte; op time: {info.get('op_time')}"
            + (f"; shares of {info['share_of']}" if info.get("share_of") else "")
        )
        notes.extend(f"{r['case']} [{r['mode']}]: {n}" for n in info.get("notes") or ())
        for op in (info.get("ops") or [])[:SHOWN]:
            rows.append(
                [
                    r["case"],
                    r["mode"],
                    op["op"],
                    op.get("calls"),
                    op.get("share"),
                    op.get("spread"),
                    _noise(op),
                    op.get("self_ms"),
                    op.get("achieved_tflops"),
                    op.get("achieved_gbps"),
                    op.get("intensity"),
                    op.get("bound") or "not counted",
                    op.get("pct_of_roofline"),
                    op.get("saving_ms"),
                    "yes" if op.get("host_fallback") else "",
                ]
            )
    return View("Hot spots against the roofline", COLUMNS, rows, notes)


MODULE_COLUMNS = columns(
    "case",
    "mode",
    "module",
    ("op calls", "count"),
    ("share", "percent"),
    ("spread", "percent"),
    "noise",
    ("ms", "ms"),
    ("achieved TFLOP/s", "tflops"),
    ("GB/s", "sci"),
    ("FLOP/byte", "sci"),
    "bound",
    ("% of roofline", "percent"),
    ("saving ms", "ms"),
)


def modules(run: dict, results: list[dict]) -> View | None:
    """The same roofline figures per innermost module (backward included)."""
    found = [r for r in results if ((r.get("findings") or {}).get("hotspots") or {}).get("modules")]
    if not found:
        return None
    rows: list[list] = []
    for r in found:
        for m in r["findings"]["hotspots"]["modules"][:SHOWN]:
            rows.append(
                [
                    r["case"],
                    r["mode"],
                    m["op"],
                    m.get("calls"),
                    m.get("share"),
                    m.get("spread"),
                    _noise(m),
                    m.get("self_ms"),
                    m.get("achieved_tflops"),
                    m.get("achieved_gbps"),
                    m.get("intensity"),
                    m.get("bound") or "not counted",
                    m.get("pct_of_roofline"),
                    m.get("saving_ms"),
                ]
            )
    notes = []
    for r in found:
        info = r["findings"]["hotspots"]
        if info.get("modules_time"):
            notes.append(f"{r['case']} [{r['mode']}]: time: {info['modules_time']}")
        check = info.get("self_check")
        if check is not None and not check.get("stable", True):
            notes.append(f"{r['case']} [{r['mode']}]: profile UNSTABLE: {check.get('reason')}")
    return View("Hot spots by module", MODULE_COLUMNS, rows, notes)


def _noise(row: dict) -> str:
    """'unstable' where the share's spread is wide; '' where it is not, or was not measured
    (a result recorded before spreads were)."""
    return "unstable" if row.get("unstable") else ""
