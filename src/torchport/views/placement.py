"""Where the work ran: per result the placement grade, the host ops named with how each was
found, tensors left on the host, copies and bytes."""

from __future__ import annotations

from torchport.records.words import listed
from torchport.views.base import Annotated, Copies, View, columns


def short_op(name: str) -> str:
    """``cumsum`` for aten.cumsum.default; other namespaces and overloads stay visible."""
    return name.removeprefix("aten.").removesuffix(".default")


def host_ops(fallback_ops: dict, classes: dict[str, str] | None = None) -> dict[str, int]:
    """Every fallback op with its calls per step: evidence class first (``classes``: short op
    -> a/b/c, from findings["host_ops"]), most called second (the renderer shows the top few)."""
    classes = classes or {}
    ranked = sorted(
        fallback_ops.items(),
        key=lambda kv: (classes.get(short_op(kv[0]), "e"), -_calls(kv[1]), kv[0]),
    )
    return {short_op(op): n for op, n in ranked}


def _calls(n) -> int:
    return n if isinstance(n, int) else 0


# How a host op was found, shortened for a table (the full text is in findings["host_ops"]).
FOUND_BY = (
    ("dispatcher", "dispatcher"),
    ("nested", "nested"),
    ("backend op list", "list"),
    ("warning", "warning"),
    ("recorder", "host tensors"),
)
FOUND_SHOWN = 3


def found_by(host_ops_found: list[dict]) -> str | None:
    """``relu: nested; cumsum: dispatcher, nested, warning`` for the most called host ops."""
    # class d (host work inside a device kernel) is shown apart: see ``host_kernels``
    entries = [
        h
        for h in host_ops_found
        if isinstance(h, dict) and "op" in h and h.get("evidence_class") != "d"
    ]
    ranked = sorted(
        entries,
        key=lambda h: (str(h.get("evidence_class") or "e"), -(h.get("count") or 0), str(h["op"])),
    )
    parts = []
    for h in ranked[:FOUND_SHOWN]:
        if not isinstance(h, dict) or "op" not in h:
            continue
        tags = [
            short
            for prefix, short in FOUND_BY
            if any(str(how).startswith(prefix) for how in h.get("found_by") or ())
        ]
        klass = f" [{h['evidence_class']}]" if h.get("evidence_class") else ""
        parts.append(f"{short_op(h['op'])}{klass}: {', '.join(tags) or '?'}")
    return "; ".join(parts) or None


def left_on_host(result: dict) -> str | None:
    """A note naming the parameters and buffers a move left on the host, with their copies."""
    off = (result.get("findings") or {}).get("placement_off_device") or []
    if not off or result.get("grade") == "host":
        return None
    return (
        f"{result['case']} ({result['mode']}) left on the host: {listed([_tensor(t) for t in off])}"
    )


def _tensor(entry) -> str:
    """``inv_freq (buffer, 1 copies per step)``; an entry of an older record as it is."""
    if not isinstance(entry, dict):
        return str(entry)
    copied = f", {entry['copies_per_step']} copies per step" if "copies_per_step" in entry else ""
    return f"{entry.get('name')} ({entry.get('kind')}{copied})"


def copies(metrics: dict) -> Copies | None:
    count = metrics.get("placement_copies")
    if count is None:
        return None
    return Copies(
        count, *(int(metrics.get(f"placement_{d}_bytes") or 0) for d in ("h2d", "d2h", "d2d"))
    )


def grade(result: dict):
    """The grade (with tensors left off the device), or why there is none."""
    findings = result.get("findings") or {}
    if result.get("grade"):
        off = findings.get("placement_off_device") or []
        return (
            Annotated(result["grade"], f"{len(off)} tensors off device") if off else result["grade"]
        )
    if "placement_unavailable" in findings:
        return "unavailable: " + str(findings["placement_unavailable"])
    errors = [e for e in findings.get("probe_errors") or () if e.get("probe") == "placement"]
    if errors:
        return f"probe error: {errors[0].get('type')}: {errors[0].get('message', '')}"
    return None  # the ladder stopped before the probe (see the status)


def build(run: dict, results: list[dict]) -> View | None:
    asked = "placement" in ((run.get("config") or {}).get("probes") or ())
    observed = results if asked else [r for r in results if r.get("grade")]
    if not observed:
        return None
    rows = []
    for r in observed:
        findings, metrics = r.get("findings") or {}, r.get("metrics") or {}
        rows.append(
            [
                r["case"],
                r["mode"],
                r["status"],
                grade(r),
                host_ops(findings.get("fallback_ops") or {}, op_classes([r])),
                found_by(findings.get("host_ops") or []),
                copies(metrics),
            ]
        )
    passes = [r for r in observed if r["status"] == "pass"]
    clean = sum(1 for r in passes if r.get("grade") == "on_device")
    fallback = sum(1 for r in passes if r.get("grade") == "fallback")
    host = sum(1 for r in passes if r.get("grade") == "host")
    kernels = sum(1 for r in passes if r.get("grade") == "host_kernel")
    notes = [
        f"{clean} / {len(passes)} passes ran on the device (clean), {fallback} pass + "
        f"fallback, {host} pass on the host"
        + (f", {kernels} pass whose device kernels compute on the host" if kernels else "")
    ]
    notes += [note for r in observed if (note := host_kernels(r))]
    ranked = ranked_host_ops(observed)[:5]
    if ranked:
        notes.append(
            "host ops across results: "
            + ", ".join(
                f"{op} ({len(keys)} result{'s' if len(keys) > 1 else ''})" for op, keys, _ in ranked
            )
        )
    notes += [note for r in observed if (note := left_on_host(r))]
    degraded = {
        f["placement_degraded"]
        for r in observed
        if (f := r.get("findings") or {}).get("placement_degraded")
    }
    notes += [f"degraded: {d}" for d in sorted(degraded)]
    return View(
        "Placement (calls per step)",
        columns(
            "case",
            "mode",
            "status",
            ("grade", "error"),
            ("host ops", "op_counts"),
            "found by",
            ("copies", "copies"),
        ),
        rows,
        notes,
    )


def host_kernels(result: dict) -> str | None:
    """A note naming the device kernels that compute on the host (evidence class d alone: not
    a fallback, shown apart from the host ops)."""
    ops = (result.get("findings") or {}).get("host_kernel_ops") or {}
    if not ops:
        return None
    ranked = sorted(ops.items(), key=lambda kv: (-_calls(kv[1]), kv[0]))
    named = listed([f"{short_op(op)} x{n}" for op, n in ranked])
    return (
        f"{result['case']} ({result['mode']}): device kernels with host work inside "
        f"(class d, not a fallback): {named}"
    )


def op_classes(results: list[dict]) -> dict[str, str]:
    """short op -> its strongest evidence class over ``results`` (findings["host_ops"])."""
    classes: dict[str, str] = {}
    for r in results:
        for h in (r.get("findings") or {}).get("host_ops") or ():
            if isinstance(h, dict) and h.get("evidence_class") and "op" in h:
                op = short_op(str(h["op"]))
                classes[op] = min(classes.get(op, "e"), str(h["evidence_class"]))
    return classes


def ranked_host_ops(results: list[dict]) -> list[tuple[str, list[tuple[str, str]], int]]:
    """``(op, [(case, mode)...], calls per step summed)`` for every op some result ran on the
    host: by evidence class first (a dispatcher fallback before a warned one), then the op in
    most results."""
    found: dict[str, tuple[list[tuple[str, str]], list[int]]] = {}
    for r in results:
        for op, calls in ((r.get("findings") or {}).get("fallback_ops") or {}).items():
            keys, total = found.setdefault(short_op(op), ([], [0]))
            keys.append((r["case"], r["mode"]))
            total[0] += calls if isinstance(calls, int) else 0
    classes = op_classes(results)
    ranked = sorted(found.items(), key=lambda kv: (classes.get(kv[0], "e"), -len(kv[1][0]), kv[0]))
    return [(op, keys, total[0]) for op, (keys, total) in ranked]


def host_op_ranking(run: dict, results: list[dict]) -> View | None:
    """The ops most often on the host: in how many results, with their calls per step, and
    which cases (the placement table lists the same ops by case)."""
    ranked = ranked_host_ops(results)
    if not ranked:
        return None
    rows = [
        [op, len(keys), calls, ", ".join(f"{case} [{mode}]" for case, mode in keys)]
        for op, keys, calls in ranked
    ]
    return View(
        "Ops most often on the host",
        columns("op", ("results", "count"), ("calls per step", "count"), "cases"),
        rows,
        [f"{len(rows)} distinct ops ran on the host in this run"],
    )
