"""Where the work ran: per result the placement grade, the host ops named, copies and bytes."""

TOP_OPS = 3


def short_op(name: str) -> str:
    """``cumsum`` for aten.cumsum.default; other namespaces and overloads stay visible."""
    return name.removeprefix("aten.").removesuffix(".default")


# How a host op was found, shortened for a table cell (full text in findings["host_ops"]).
FOUND_BY = (("dispatcher", "dispatcher"), ("nested", "nested"), ("backend op list", "list"),
            ("warning", "warning"), ("recorder", "host tensors"))


def found_by(how: list[str]) -> str:
    tags = [short for prefix, short in FOUND_BY if any(h.startswith(prefix) for h in how)]
    return f" [{', '.join(tags)}]" if tags else ""


def host_ops(fallback_ops: dict, top: int = TOP_OPS, how: dict | None = None) -> str:
    """The top fallback ops with their calls per step and how each was found:
    ``cumsum x2 [dispatcher, nested], flip x2``."""
    ranked = sorted(fallback_ops.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{short_op(op)} x{n}{found_by((how or {}).get(op, []))}"
                      for op, n in ranked[:top])
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
        return f"probe error: {errors[0].get('type')}: {errors[0].get('message', '')[:60]}"
    return "-"  # the ladder stopped before the probe (see the status)


def build(run, results):
    asked = "placement" in ((run.get("config") or {}).get("probes") or ())
    observed = results if asked else [r for r in results if r.get("grade")]
    if not observed:
        return None
    rows = []
    for r in observed:
        findings, metrics = r.get("findings") or {}, r.get("metrics") or {}
        how = {h["op"]: h["found_by"] for h in findings.get("host_ops") or ()}
        rows.append([r["case"], r["mode"], r["status"], grade_cell(r),
                     host_ops(findings.get("fallback_ops") or {}, how=how),
                     copies_cell(metrics)])
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
    for r in observed:
        off = (r.get("findings") or {}).get("placement_off_device") or []
        if off and r.get("grade") != "host":
            notes.append(f"{r['case']} [{r['mode']}] left on the host: " + ", ".join(
                f"{t['name']} ({t['kind']}" + (f", {t['copies_per_step']} copies per step"
                                               if "copies_per_step" in t else "") + ")"
                for t in off[:4]) + (f" (+{len(off) - 4} more)" if len(off) > 4 else ""))
    degraded = {f["placement_degraded"] for r in observed
                if (f := r.get("findings") or {}).get("placement_degraded")}
    notes += [f"degraded: {d}" for d in sorted(degraded)]
    return {"title": "Placement (calls per step)",
            "columns": ["case", "mode", "status", "grade", "host ops", "copies"],
            "rows": rows, "notes": notes}
