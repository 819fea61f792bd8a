"""A device's compatibility table, generated from an evaluation's evidence: every op seen in
any suite as ``native``, ``host fallback`` (with the dtypes and the evidence class), ``fails``
or ``not reached``: the form vendors publish by hand (supported / CPU fallback / unsupported).

Two kinds of op are seen: the aten ops a model's step ran (each result's op table, from the
placement probe: where each ran, and the fallback ops with their class), and the OpInfo ops of
the ``ops`` part (their case id names the op and dtype; a failure there is the op's own).
``not reached``: an op of the ops part's plan with no result that ran (skipped for a stated
reason, or the run stopped before it). The text form (``compat_lines``) is one sorted line per
op, so two releases' tables diff line by line; ``compat_diff`` is that diff as data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from torchport.views.ops import is_op_result, split_case
from torchport.views.placement import op_classes, short_op

NATIVE, HOST, FAILS, NOT_REACHED = "native", "host fallback", "fails", "not reached"
ORDER = (FAILS, HOST, NOT_REACHED, NATIVE)


@dataclass
class CompatRow:
    op: str
    verdict: str
    dtypes: list[str] = field(default_factory=list)
    evidence_class: str | None = None  # of a host fallback (a, b, c)
    detail: str = ""  # how it failed, why not reached
    seen_in: list[str] = field(default_factory=list)  # parts

    def to_dict(self) -> dict:
        return asdict(self)


class _Op:
    def __init__(self) -> None:
        self.native: set[str] = set()
        self.host: set[str] = set()
        self.failed: dict[str, str] = {}  # dtype -> status
        self.skipped: dict[str, str] = {}  # dtype -> reason
        self.parts: set[str] = set()
        self.cls: str | None = None
        self.via: set[str] = set()  # an OpInfo op's aten ops that ran on the host


def compat_table(results_by_part: dict[str, list[dict]], plan) -> list[CompatRow]:
    """``results_by_part``: the device side's results of each part; ``plan``: the
    evaluation's plan (the ops part's planned cases, the dtype)."""
    ops: dict[str, _Op] = {}
    for part, results in results_by_part.items():
        classes = op_classes(results)
        for r in results:
            findings = r.get("findings") or {}
            if is_op_result(r):
                name, dtype = split_case(r["case"])
                entry = ops.setdefault(name, _Op())
                entry.parts.add(part)
                if r["status"] == "skip":
                    entry.skipped[dtype] = str(findings.get("skip") or "skipped")
                elif r["status"] != "pass":
                    entry.failed[dtype] = r["status"]
                elif r.get("grade") in ("fallback", "host"):
                    entry.host.add(dtype)
                    via = {short_op(op) for op in findings.get("fallback_ops") or {}}
                    entry.via |= via
                    entry.cls = min(
                        filter(None, (entry.cls, *(classes.get(op) for op in via))), default=None
                    )
                else:
                    entry.native.add(dtype)
                continue
            dtype = "float32"  # the model parts run at the evaluation's dtype
            fallback = {short_op(op) for op in findings.get("fallback_ops") or {}}
            for seen in findings.get("ops") or []:
                if not isinstance(seen, dict) or "op" not in seen:
                    continue
                name = short_op(str(seen["op"]))
                entry = ops.setdefault(name, _Op())
                entry.parts.add(part)
                if seen.get("fallback") or name in fallback:
                    entry.host.add(dtype)
                    entry.cls = min(filter(None, (entry.cls, classes.get(name))), default=None)
                else:
                    entry.native.add(dtype)
            for name in fallback:  # a fallback the op table did not list
                entry = ops.setdefault(name, _Op())
                entry.parts.add(part)
                entry.host.add(dtype)
                entry.cls = min(filter(None, (entry.cls, classes.get(name))), default=None)
    planned = [p for p in getattr(plan, "parts", []) if p.name == "ops" and p.side == "device"]
    for part in planned:
        for case in part.cases:
            name, dtype = split_case(case)
            entry = ops.setdefault(name, _Op())
            if not (entry.native or entry.host or entry.failed or entry.skipped):
                entry.parts.add("ops")
    return sorted((_row(name, e) for name, e in ops.items()), key=lambda r: r.op)


def _row(name: str, e: _Op) -> CompatRow:
    parts = sorted(e.parts)
    if e.failed:
        return CompatRow(
            name,
            FAILS,
            sorted(e.failed),
            detail=", ".join(f"{d}: {s}" for d, s in sorted(e.failed.items())),
            seen_in=parts,
        )
    if e.host:
        via = f"on the host: {', '.join(sorted(e.via))}" if e.via - {name} else ""
        return CompatRow(name, HOST, sorted(e.host), e.cls, detail=via, seen_in=parts)
    if e.native:
        return CompatRow(name, NATIVE, sorted(e.native), seen_in=parts)
    detail = ", ".join(f"{d}: {why}" for d, why in sorted(e.skipped.items())) or "no result"
    return CompatRow(name, NOT_REACHED, sorted(e.skipped), detail=detail, seen_in=parts)


def compat_counts(rows: list[CompatRow]) -> dict[str, int]:
    return {v: sum(r.verdict == v for r in rows) for v in ORDER}


def compat_lines(rows: list[CompatRow]) -> list[str]:
    """One tab-separated line per op, sorted: ``op  verdict  dtypes  class  detail``."""
    return [
        "\t".join(
            [r.op, r.verdict, ",".join(r.dtypes) or "-", r.evidence_class or "-", r.detail or "-"]
        )
        for r in rows
    ]


def compat_diff(before: list[CompatRow], after: list[CompatRow]) -> list[dict]:
    """Ops whose verdict changed, appeared or went: {op, before, after} (None: not seen)."""
    a = {r.op: r.verdict for r in before}
    b = {r.op: r.verdict for r in after}
    return [
        {"op": op, "before": a.get(op), "after": b.get(op)}
        for op in sorted(set(a) | set(b))
        if a.get(op) != b.get(op)
    ]
