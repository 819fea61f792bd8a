"""Where the work ran: per result the placement grade, the host ops named, copies and bytes."""

TOP_OPS = 3


def short_op(name: str) -> str:
    """``cumsum`` for aten.cumsum.default; other namespaces and overloads stay visible."""
    return name.removeprefix("aten.").removesuffix(".default")


def host_ops(fallback_ops: dict, top: int = TOP_OPS) -> str:
    """The top fallback ops with their calls per step: ``cumsum x2, flip x2``."""
    ranked = sorted(fallback_ops.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{short_op(op)} x{n}" for op, n in ranked[:top])
    more = len(ranked) - top
    return shown + (f" (+{more} more)" if more > 0 else "")


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def copies_cell(metrics: dict) -> str:
    count = metrics.get("placement_copies")
    if count is None:
        return ""
    if not count:
        return "none"
    moved = [f"{d} {human_bytes(metrics[f'placement_{d}_bytes'])}" for d in ("h2d", "d2h", "d2d")
             if metrics.get(f"placement_{d}_bytes")]
    return f"{count}: " + ", ".join(moved) if moved else str(count)


def grade_cell(result: dict) -> str:
    findings = result.get("findings") or {}
    if result.get("grade"):
        off = findings.get("placement_off_device") or []
        return result["grade"] + (f" ({len(off)} tensors off device)" if off else "")
    if "placement_unavailable" in findings:
        return "unavailable: " + findings["placement_unavailable"]
    errors = [e for e in findings.get("probe_errors") or () if e.get("probe") == "placement"]
    if errors:
        from torchport.interfaces.views.matrix import trim_middle
        return f"probe error: {errors[0].get('type')}: " + trim_middle(
            (errors[0].get("message") or "").strip())
    return "-"  # the ladder stopped before the probe (see the status)


def build(run, results):
    asked = "placement" in ((run.get("config") or {}).get("probes") or ())
    observed = results if asked else [r for r in results if r.get("grade")]
    if not observed:
        return None
    rows = []
    for r in observed:
        findings, metrics = r.get("findings") or {}, r.get("metrics") or {}
        rows.append([r["case"], r["mode"], r["status"], grade_cell(r),
                     host_ops(findings.get("fallback_ops") or {}), copies_cell(metrics)])
    passes = [r for r in observed if r["status"] == "pass"]
    clean = sum(1 for r in passes if r.get("grade") == "on_device")
    fallback = sum(1 for r in passes if r.get("grade") == "fallback")
    host = sum(1 for r in passes if r.get("grade") == "host")
    notes = [f"{clean} / {len(passes)} passes ran on the device (clean), {fallback} pass + "
             f"fallback, {host} pass on the host"]
    totals: dict[str, int] = {}
    for r in observed:
        for op, n in ((r.get("findings") or {}).get("fallback_ops") or {}).items():
            totals[short_op(op)] = totals.get(short_op(op), 0) + 1
    if totals:
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        notes.append("host ops across results: " + ", ".join(
            f"{op} ({n} result{'s' if n > 1 else ''})" for op, n in ranked))
    degraded = {f["placement_degraded"] for r in observed
                if (f := r.get("findings") or {}).get("placement_degraded")}
    notes += [f"degraded: {d}" for d in sorted(degraded)]
    return {"title": "Placement (calls per step)",
            "columns": ["case", "mode", "status", "grade", "host ops", "copies"],
            "rows": rows, "notes": notes}
