"""A Comparison as titled tables (Views): what ``torchport compare`` prints, in its order."""

from __future__ import annotations

from torchport.records import RESULT_STATUSES
from torchport.records.figures import line_words
from torchport.records.status import NOT_FAILURES
from torchport.views.base import Column, View, columns
from torchport.views.compare import (
    COMPILE_METRICS,
    LIST_READS,
    PARITY_METRICS,
    STATUS_LISTS,
    Comparison,
)
from torchport.views.compare_dist import dist_views
from torchport.views.compare_placement import placement_summary_view
from torchport.views.op_coverage import diff_views as coverage_views

LIST_ROWS = 30  # rows per list in the text form; --json carries every one


def _status(status: str, stage: str | None) -> str:
    return f"{status} @{stage}" if stage and status not in NOT_FAILURES else status


def _capped(
    title: str,
    cols,
    rows: list[list],
    limit: int | None,
    notes=(),
    total: int | None = None,
    offset: int = 0,
    held_from: int = 0,
) -> View:
    """``limit`` rows from ``offset``; ``total``: the list's length when ``rows`` holds only
    some of its rows, ``held_from``: the first of them (a later page)."""
    start = offset - held_from
    shown = rows[start:] if limit is None else rows[start : start + limit]
    total = len(rows) if total is None else total
    notes = list(notes)
    if offset:
        notes.append(f"rows {offset + 1}-{offset + len(shown)} of {total}")
    elif len(shown) < total:
        notes.append(f"{total - len(shown)} more not shown; --all or --json for every row")
    return View(f"{title} ({total})", cols, shown, notes)


def environment_view(cmp: Comparison) -> View:
    a, b = cmp.run_a, cmp.run_b
    head = [
        ["run", a["id"], b["id"]],
        ["device", a["device"], b["device"]],
        ["suite", a["suite"], b["suite"]],
        ["state", a["state"], b["state"]],
        ["labels", a["labels"] or "-", b["labels"] or "-"],
    ]
    rows = head + [[d["key"], d["a"], d["b"]] for d in cmp.environment]
    notes = [] if cmp.environment else ["same environment fingerprint"]
    return View("Environment difference (A -> B)", columns("", "A", "B"), rows, notes)


def transitions_view(cmp: Comparison) -> View:
    seen = {s for row in cmp.transitions.values() for s in row} | set(cmp.transitions)
    order = [s for s in RESULT_STATUSES if s in seen] + sorted(seen - set(RESULT_STATUSES))
    rows = [
        [before] + [cmp.transitions.get(before, {}).get(after) for after in order]
        for before in order
        if before in cmp.transitions
    ]
    cols = (Column("A \\ B"),) + tuple(Column(s, "count") for s in order)
    return View("Status transitions (rows: A, columns: B)", cols, rows, list(cmp.remarks))


def status_list(
    title: str,
    entries: list[dict],
    limit: int | None,
    total: int | None = None,
    offset: int = 0,
    held_from: int = 0,
) -> View:
    rows = [
        [
            e["case"],
            e["mode"],
            _status(e["before"], e["before_stage"]),
            _status(e["after"], e["after_stage"]),
            e.get("error"),
        ]
        for e in entries
    ]
    cols = columns("case", "mode", "A", "B", ("error", "error"))
    return _capped(title, cols, rows, limit, total=total, offset=offset, held_from=held_from)


def host_ops_view(cmp: Comparison, limit: int | None, offset: int = 0, held_from: int = 0) -> View:
    def cases(keys: list[list[str]]) -> str:
        shown = ", ".join(f"{c} [{m}]" for c, m in keys[:3])
        return shown + (f" (+{len(keys) - 3})" if len(keys) > 3 else "")

    # evidence class first (a dispatcher fallback before a warned one), then cases changed
    rows = [
        [
            op + (f" [{v['class']}]" if v.get("class") else ""),
            len(v["added"]),
            cases(v["added"]),
            len(v["removed"]),
            cases(v["removed"]),
        ]
        for op, v in sorted(
            cmp.host_ops.items(),
            key=lambda kv: (
                kv[1].get("class") or "e",
                -len(kv[1]["added"]) - len(kv[1]["removed"]),
                kv[0],
            ),
        )
    ]
    grades = sum(1 for p in cmp.placement if p["before"] != p["after"])
    return _capped(
        "Host ops added or removed (placement)",
        columns("op", ("now on host", "count"), "cases", ("back on device", "count"), "cases"),
        rows,
        limit,
        [f"{len(cmp.placement)} pairs changed placement; {grades} changed grade"],
        offset=offset,
        held_from=held_from,
    )


def parity_view(cmp: Comparison, limit: int | None, offset: int = 0, held_from: int = 0) -> View:
    rows = [
        [p["case"], p["mode"], p["metric"], p["before"], p["after"], p["factor"]]
        for p in cmp.parity
    ]
    return _capped(
        f"Parity drift ({line_words('parity')})",
        columns("case", "mode", "metric", ("A", "sci"), ("B", "sci"), ("factor", "ratio")),
        rows,
        limit,
        total=cmp.totals.get("parity"),
        offset=offset,
        held_from=held_from,
    )


def perf_view(cmp: Comparison, limit: int | None, offset: int = 0, held_from: int = 0) -> View:
    ordered = sorted(cmp.perf, key=lambda p: -abs(p.ratio - 1))
    rows = [[p.case, p.mode, p.before_ms, p.after_ms, p.ratio, p.verdict, p.test] for p in ordered]
    return _capped(
        "Step time beyond measured noise",
        columns(
            "case",
            "mode",
            ("A ms", "ms"),
            ("B ms", "ms"),
            ("B/A", "ratio"),
            "verdict",
            "deciding test",
        ),
        rows,
        limit,
        total=cmp.totals.get("perf"),
        offset=offset,
        held_from=held_from,
    )


def compile_view(cmp: Comparison, limit: int | None, offset: int = 0, held_from: int = 0) -> View:
    rows = [
        [c["case"], c["mode"], c["metric"], c["before_s"], c["after_s"], c["ratio"], c["verdict"]]
        for c in cmp.compile
    ]
    return _capped(
        f"Compile time {line_words('compile')}",
        columns("case", "mode", "metric", ("A", "s"), ("B", "s"), ("B/A", "ratio"), "verdict"),
        rows,
        limit,
        total=cmp.totals.get("compile"),
        offset=offset,
        held_from=held_from,
    )


def memory_view(cmp: Comparison, limit: int | None, offset: int = 0, held_from: int = 0) -> View:
    rows = [
        [m["case"], m["mode"], m["before_bytes"], m["after_bytes"], m["ratio"]] for m in cmp.memory
    ]
    return _capped(
        f"Peak memory {line_words('memory')}",
        columns("case", "mode", ("A", "bytes"), ("B", "bytes"), ("B/A", "ratio")),
        rows,
        limit,
        total=cmp.totals.get("memory"),
        offset=offset,
        held_from=held_from,
    )


def notes_view(notes: list[dict], title: str = "Notes") -> View:
    rows = [
        [
            n["run_id"],
            n.get("case") or "(run)",
            n.get("mode"),
            n.get("author"),
            n.get("created_at"),
            n["text"],
        ]
        for n in notes
    ]
    return View(
        f"{title} ({len(rows)})", columns("run", "case", "mode", "author", "written", "note"), rows
    )


STATUS_TITLES = {name: name.replace("_", " ").capitalize() for name in STATUS_LISTS}
LISTS = tuple(LIST_READS)


def list_view(
    cmp: Comparison, name: str, limit: int | None, offset: int = 0, held_from: int = 0
) -> View | None:
    """One of LISTS as a table, ``limit`` rows from ``offset``; None when it is empty.
    ``held_from``: the first row the comparison holds (read after a key: a later page)."""
    if name in STATUS_TITLES:
        entries = getattr(cmp, name)
        if not entries:
            return None
        total = cmp.totals.get(name)
        return status_list(STATUS_TITLES[name], entries, limit, total, offset, held_from)
    makers = {
        "host_ops": (cmp.host_ops or cmp.placement, host_ops_view),
        "parity": (cmp.parity, parity_view),
        "perf": (cmp.perf, perf_view),
        "compile": (cmp.compile, compile_view),
        "memory": (cmp.memory, memory_view),
    }
    present, make = makers[name]
    return make(cmp, limit, offset, held_from) if present else None


def after_row(name: str, row: list) -> dict | None:
    """Where a later page of list ``name`` starts: the key of its last row shown (views/
    compare.compare_runs ``after``); None for the host ops, a table of ops read whole."""
    if name == "host_ops":
        return None
    key = {"case": row[0], "mode": row[1], "metric": 0, "gap": None}
    if name in ("parity", "compile"):
        key["metric"] = (PARITY_METRICS if name == "parity" else COMPILE_METRICS).index(row[2])
    if name == "perf":
        key["gap"] = abs(row[4] - 1)  # B/A, as the database orders step-time changes
    return key


def list_length(cmp: Comparison, name: str) -> int:
    """How many rows LISTS' ``name`` holds in all (the first rows may be all there is)."""
    if name == "host_ops":
        return len(cmp.host_ops)
    return cmp.totals.get(name, len(getattr(cmp, name)))


def comparison_views(cmp: Comparison, *, limit: int | None = LIST_ROWS) -> list[View]:
    """The environment difference first, then what changed; empty sections are left out."""
    views = [environment_view(cmp), transitions_view(cmp)]
    views += [v for name in LISTS if (v := list_view(cmp, name, limit)) is not None]
    if cmp.placement_summary and (
        cmp.placement_summary["a"]["host_ops"] or cmp.placement_summary["b"]["host_ops"]
    ):
        views.append(placement_summary_view(cmp.placement_summary))
    views += dist_views(cmp.dist)
    views += coverage_views(cmp.coverage)
    if cmp.notes:
        views.append(notes_view(cmp.notes))
    return views
