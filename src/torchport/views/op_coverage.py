"""Operator coverage with a denominator: "X of Y backend-relevant aten overloads tested".

Y is the dispatcher's registry for the run's device (the ``audit/dispatcher`` result,
``instruments/op_coverage.py``): every ``aten::`` overload that reaches the device's dispatch
key as itself (composite-implicit ones decompose above it and are counted apart). Each is
``tested`` (a case of the run dispatched it on the device: the first such case is named, with
how many did), ``excluded`` (a reason of ``cases.ops_reasons.EXCLUDE_REASONS``), ``not_reached``
or ``unknown`` (the dispatcher could not say). A tested overload that is also in an excluded
family counts as tested. ``diff`` compares two runs' coverage (a release against the last).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from torchport.views.base import View, columns

AUDIT_LADDER = "audit"
STATES = ("tested", "excluded", "not_reached", "unknown")
CHANGES_SHOWN = 40  # changed overloads a comparison's table lists (--json: all)
OUTSIDE = "composite_implicit"  # decomposed above the backend: outside the denominator


def registry_name(op: str) -> str:
    """``aten.add.Tensor`` / ``aten.sin.default`` (as recorded) -> ``aten::add.Tensor`` /
    ``aten::sin`` (as the dispatcher registers them)."""
    namespace, _, rest = op.partition(".")
    packet, _, overload = rest.partition(".")
    name = f"{namespace}::{packet}"
    return name if overload in ("", "default") else f"{name}.{overload}"


def find_audit(results: list[dict]) -> dict | None:
    for r in results:
        findings = r.get("findings") or {}
        if findings.get("ladder") == AUDIT_LADDER and findings.get("coverage_audit"):
            return findings["coverage_audit"]
    return None


def dispatched(results: list[dict], device: str | None) -> dict[str, list[str]]:
    """Registry name -> the cases that dispatched it on the run's device (not host tensors'
    ops, not copies)."""
    target = (device or "").split(":")[0]
    found: dict[str, list[str]] = {}
    for r in results:
        for row in (r.get("findings") or {}).get("ops") or ():
            where = row.get("device") or ""
            if "->" in where or (target and where.split(":")[0] != target):
                continue
            cases = found.setdefault(registry_name(row["op"]), [])
            if not cases or cases[-1] != r["case"]:
                cases.append(r["case"])
    return found


@dataclass
class Coverage:
    device: str | None
    dispatch_key: str
    source: str
    suite: str | None
    # backend-relevant overload -> (state, how the dispatcher serves it, reason or first case)
    entries: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)
    tested_by: dict[str, int] = field(default_factory=dict)  # overload -> cases that ran it
    outside: int = 0  # composite-implicit overloads (decompose above the backend)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.entries)

    def count(self, state: str) -> int:
        return sum(1 for s, _, _ in self.entries.values() if s == state)

    def reasons(self) -> Counter[str]:
        return Counter(r for s, _, r in self.entries.values() if s == "excluded" and r)

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "dispatch_key": self.dispatch_key,
            "source": self.source,
            "backend_relevant": self.total,
            "states": {s: self.count(s) for s in STATES},
            "excluded": dict(self.reasons()),
            "composite_implicit": self.outside,
            "notes": self.notes,
        }


def coverage(run: dict, results: list[dict]) -> Coverage | None:
    """The run's coverage, or None when it has no audit."""
    audit = find_audit(results)
    if audit is None:
        return None
    ran = dispatched(results, run.get("device"))
    cov = Coverage(
        device=run.get("device"),
        dispatch_key=audit.get("dispatch_key", "?"),
        source=audit.get("source", "?"),
        suite=run.get("suite"),
        notes=list(audit.get("notes") or ()),
    )
    for name, (served, reason) in sorted(audit["overloads"].items()):
        if served == OUTSIDE and name not in ran:
            cov.outside += 1
            continue
        if name in ran:
            cov.entries[name] = ("tested", served, f"{cov.suite}: {ran[name][0]}")
            cov.tested_by[name] = len(ran[name])
        elif reason:
            cov.entries[name] = ("excluded", served, reason)
        elif served == "unknown":
            cov.entries[name] = ("unknown", served, None)
        else:
            cov.entries[name] = ("not_reached", served, None)
    return cov


def percent(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "-"


def summary(cov: Coverage) -> str:
    """The one line: "X of Y backend-relevant aten overloads tested" with the rest."""
    y, tested, excluded = cov.total, cov.count("tested"), cov.count("excluded")
    reasons = ", ".join(f"{k} {v}" for k, v in cov.reasons().most_common())
    line = (
        f"coverage: {tested} of {y} backend-relevant aten overloads tested "
        f"({percent(tested, y)}) on {cov.dispatch_key}; {excluded} excluded"
        + (f" ({reasons})" if reasons else "")
        + f"; {cov.count('not_reached')} not reached"
        + (f"; {cov.count('unknown')} unknown" if cov.count("unknown") else "")
        + f"; tested or excluded {percent(tested + excluded, y)}"
        + f" ({cov.outside} composite-implicit overloads decompose above the backend, "
        "outside the count)"
    )
    return line


def served_counts(cov: Coverage) -> str:
    """How the dispatcher serves the denominator: kernel, composite, fallback, missing."""
    served = Counter(s for _, s, _ in cov.entries.values())
    return f"the {cov.total} on {cov.dispatch_key} ({cov.source}): " + ", ".join(
        f"{n} {k}" for k, n in served.most_common()
    )


def view(cov: Coverage, states: tuple[str, ...] = STATES) -> View:
    """One row per backend-relevant overload (``show RUN --csv ops-coverage``)."""
    rows = [
        [
            name,
            state,
            served,
            detail if state != "tested" else None,
            detail if state == "tested" else None,
            cov.tested_by.get(name),
        ]
        for name, (state, served, detail) in cov.entries.items()
        if state in states
    ]
    return View(
        f"Operator coverage on {cov.device} ({cov.dispatch_key})",
        columns("overload", "state", "served as", "reason", "tested by", ("cases", "count")),
        rows,
        [summary(cov), served_counts(cov), *cov.notes],
    )


def diff(a: Coverage | None, b: Coverage | None) -> dict:
    """What changed from run A's coverage to run B's (JSON-ready): each side's figures, the
    overloads newly tested and no longer tested, those only one registry has, and those the
    dispatcher serves differently (``fallback`` -> ``kernel``: a new native kernel)."""
    out: dict = {"a": a.to_dict() if a else None, "b": b.to_dict() if b else None}
    if a is None or b is None:
        return out
    ea, eb = a.entries, b.entries
    both = sorted(set(ea) & set(eb))
    out["newly_tested"] = [n for n in both if eb[n][0] == "tested" != ea[n][0]]
    out["no_longer_tested"] = [n for n in both if ea[n][0] == "tested" != eb[n][0]]
    out["only_a"] = sorted(set(ea) - set(eb))
    out["only_b"] = sorted(set(eb) - set(ea))
    out["served_changed"] = [
        {"overload": n, "a": ea[n][1], "b": eb[n][1]} for n in both if ea[n][1] != eb[n][1]
    ]
    return out


def diff_views(changes: dict, limit: int | None = CHANGES_SHOWN) -> list[View]:
    """A comparison's coverage table: both runs' "X of Y", then each change listed."""
    a, b = changes.get("a"), changes.get("b")
    if a is None and b is None:
        return []
    rows = []
    for label, side in (("A", a), ("B", b)):
        if side is None:
            rows.append([label, None, None, None, None, None, "no coverage audit in this run"])
            continue
        states = side["states"]
        rows.append(
            [
                label,
                side["dispatch_key"],
                side["backend_relevant"],
                states["tested"],
                states["excluded"],
                states["not_reached"],
                f"{states['tested']} of {side['backend_relevant']} tested "
                f"({percent(states['tested'], side['backend_relevant'])})",
            ]
        )
    views = [
        View(
            "Operator coverage (dispatcher audit)",
            columns(
                "run",
                "key",
                ("overloads", "count"),
                ("tested", "count"),
                ("excluded", "count"),
                ("not reached", "count"),
                "X of Y",
            ),
            rows,
        )
    ]
    changed = [
        [kind, name, None, None]
        for kind in ("newly_tested", "no_longer_tested", "only_a", "only_b")
        for name in changes.get(kind) or ()
    ] + [
        ["served_changed", c["overload"], c["a"], c["b"]]
        for c in changes.get("served_changed") or ()
    ]
    if changed:
        shown = changed if limit is None else changed[:limit]
        views.append(
            View(
                f"Operator coverage changes ({len(changed)})",
                columns("change", "overload", "A served as", "B served as"),
                shown,
                [f"first {len(shown)} of {len(changed)}; all in 'compare --json'"]
                if len(shown) < len(changed)
                else [],
            )
        )
    return views


def slim(result: dict) -> dict | None:
    """What coverage reads of a result (its case, its dispatched ops, an audit), or None."""
    findings = result.get("findings") or {}
    if not (findings.get("ops") or findings.get("coverage_audit")):
        return None
    keep = {k: findings[k] for k in ("ops", "ladder", "coverage_audit") if k in findings}
    return {"case": result["case"], "findings": keep}
