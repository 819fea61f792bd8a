"""What a search finds beside the full text of results and notes: the results that ran an op
on the host (``search cumsum``: the op table's index, each overload of ``aten.cumsum``) and
the runs whose labels mention the text. Error signatures are the error's type and first line,
which the full text already covers.

Ranked as a reader asks: host ops first (the strongest evidence class, then the most results),
then the runs by label; the full-text results and notes follow in the page or command.
"""

from __future__ import annotations

import re

from torchport.views.base import Fraction, View, columns
from torchport.views.host_op import full_op_name, op_results_view

# An op name as typed: cumsum, aten.cumsum, aten::cumsum, aten.cumsum.default.
OP_TEXT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z0-9_]+){0,2}$")


def host_op_hits(store, text: str, runs: dict[str, dict], limit: int) -> dict[str, View]:
    """Views of the runs and results that ran ``text`` (an op name) on the host; empty when
    the text is not an op name or no result ran it there."""
    text = text.strip()
    if not OP_TEXT.match(text):
        return {}
    name = full_op_name(text)
    by_run = store.results(fallback_op=name, by_run=True)
    total = sum(by_run.values())
    if not total:
        return {}
    rows = [
        [
            run_id,
            (runs.get(run_id) or {}).get("device"),
            (runs.get(run_id) or {}).get("suite"),
            (runs.get(run_id) or {}).get("labels") or {},
            Fraction(n, sum(((runs.get(run_id) or {}).get("counts") or {}).values()) or n),
        ]
        for run_id, n in sorted(by_run.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    runs_view = View(
        f"{name} ran on the host in {total} results of {len(rows)} runs",
        columns("run", "device", "suite", ("labels", "labels"), ("results", "count")),
        rows,
        [f"every overload of {name}; the op's own page lists them all"],
    )
    page = store.results(fallback_op=name, limit=limit)
    results = op_results_view(name, page, runs)
    results.title = f"Results that ran {name} on the host (first {len(page)} of {total})"
    return {"host_op_runs": runs_view, "host_op_results": results}


def label_hits(text: str, runs: list[dict]) -> View | None:
    """Runs whose label keys or values contain every word of ``text`` (case ignored)."""
    words = [w.lower() for w in text.split() if w]
    found = []
    for run in runs:
        labels = run.get("labels") or {}
        hay = " ".join(f"{k}={v}" for k, v in labels.items()).lower()
        if words and labels and all(w in hay for w in words):
            found.append(run)
    if not found:
        return None
    return View(
        f"{len(found)} runs labelled with {text!r}",
        columns("run", "started", "device", "suite", ("labels", "labels")),
        [[r["id"], r["started_at"], r["device"], r["suite"], r.get("labels") or {}] for r in found],
    )


def more_hits(store, text: str, limit: int) -> dict[str, View]:
    """Host-op hits, then label hits, as views keyed by name (empty when none)."""
    runs = store.runs()
    views = host_op_hits(store, text, {r["id"]: r for r in runs}, limit)
    if (labelled := label_hits(text, runs)) is not None:
        views["labelled_runs"] = labelled
    return views
