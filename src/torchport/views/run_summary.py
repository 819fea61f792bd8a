"""A large run in summary: status counts and its failures grouped by error signature, the
most common and the worst, from the store's indexes (no result is loaded)."""

from __future__ import annotations

from torchport.records import RESULT_STATUSES
from torchport.views.base import Fraction, View, columns

GROUPS_SHOWN = 10


def status_view(run: dict, counts: dict[str, int]) -> View:
    total = sum(counts.values())
    planned = run.get("planned", len(run.get("plan") or [])) or total
    rows = [[s, Fraction(counts[s], total)] for s in RESULT_STATUSES if counts.get(s)]
    rows += [[s, Fraction(n, total)] for s, n in sorted(counts.items()) if s not in RESULT_STATUSES]
    return View(
        "Status counts",
        columns("status", ("results", "count")),
        rows,
        [f"{total} / {planned} planned results recorded"],
    )


def groups_view(title: str, groups: list[dict], total_groups: int) -> View:
    rows = []
    for g in groups:
        where = ", ".join(f"{e['case']} [{e['mode']}]" for e in g["examples"])
        more = g["count"] - len(g["examples"])
        rows.append(
            [
                f"{g['status']} @{g['stage']}" if g["stage"] else g["status"],
                g["count"],
                g["signature"],
                where + (f" (+{more})" if more > 0 else ""),
            ]
        )
    notes = (
        [
            f"{total_groups} distinct failures (status, stage, error signature); the "
            "signature is the error type and first line with numbers taken out"
        ]
        if total_groups
        else ["no failures"]
    )
    return View(
        title,
        columns("status", ("results", "count"), ("signature", "error"), "examples"),
        rows,
        notes,
    )


def summary_views(store, run: dict, *, groups: int = GROUPS_SHOWN) -> dict[str, View]:
    counts = store.headline(run["id"]).get(run["id"], {}).get("statuses", {})
    total_groups = store.failures(run["id"], count=True)
    views = {
        "summary": status_view(run, counts),
        "common_failures": groups_view(
            "Most common failures", store.failures(run["id"], limit=groups), total_groups
        ),
    }
    if total_groups:
        views["worst_failures"] = groups_view(
            "Worst failures (worker deaths and early stops first)",
            store.failures(run["id"], worst_first=True, limit=groups),
            total_groups,
        )
    return views
