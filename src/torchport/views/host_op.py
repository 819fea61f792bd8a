"""One operator across the knowledge base: which runs (devices, releases) ran it on the host in
how many results, and a page of those results with the op's calls per step.

Counts come from ``store.results(run_id=..., fallback_op=..., count=True)`` and the page from
``store.results(fallback_op=..., limit=...)`` (the op table's index); nothing is loaded whole.
"""

from __future__ import annotations

from torchport.views.base import Fraction, View, columns
from torchport.views.placement import short_op


def full_op_name(op: str) -> str:
    """``cumsum`` -> ``aten.cumsum`` (the store matches every overload of a dotted name);
    a name with a namespace or an overload stays as given."""
    op = op.replace("::", ".")
    return op if "." in op else f"aten.{op}"


def op_runs_view(op: str, counts: list[tuple[dict, int]]) -> View:
    """``counts``: (run as listed by ``store.runs``, results with ``op`` on the host)."""
    rows = [
        [
            run["id"],
            run["device"],
            run["suite"],
            run.get("labels") or {},
            Fraction(n, sum((run.get("counts") or {}).values())),
        ]
        for run, n in counts
        if n
    ]
    devices = sorted({row[1] for row in rows})
    notes = [
        f"{op} ran on the host in {sum(n for _, n in counts)} results of {len(rows)} runs"
        + (f" on {', '.join(devices)}" if devices else "")
    ]
    return View(
        f"Runs with {op} on the host",
        columns("run", "device", "suite", ("labels", "labels"), ("results", "count")),
        rows,
        notes,
    )


def op_results_view(op: str, results: list[dict], runs: dict[str, dict]) -> View:
    """A page of the results that ran ``op`` on the host, with its calls per step."""
    rows = []
    for r in results:
        calls = {
            short_op(name): n
            for name, n in ((r.get("findings") or {}).get("fallback_ops") or {}).items()
            if name == op or name.startswith(op + ".")
        }
        rows.append(
            [
                r["case"],
                r["mode"],
                r["run_id"],
                (runs.get(r["run_id"]) or {}).get("device"),
                r["status"],
                r.get("grade"),
                calls,
            ]
        )
    return View(
        f"Results with {op} on the host",
        columns(
            "case", "mode", "run", "device", "status", "grade", ("calls per step", "op_counts")
        ),
        rows,
    )
