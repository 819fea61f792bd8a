"""Listings for the query commands (runs, results, search, cases), as Views like the others."""

from __future__ import annotations

from dataclasses import dataclass

from torchport.views.base import Column, View, columns, outcome


@dataclass(frozen=True)
class Tally:
    """Results recorded out of planned, and how many of each status: ``10/10: pass 10``."""

    recorded: int
    planned: int
    by_status: dict[str, int]


def runs_view(runs: list[dict], headlines: dict | None = None) -> View:
    """``headlines``: run id -> views.headline.Headline, a column of its own when given."""
    rows = [
        [
            run["id"],
            run["started_at"],
            run["state"],
            run["suite"],
            run["device"],
            Tally(
                sum(run["counts"].values()),
                run["planned"] if "planned" in run else len(run.get("plan") or []),
                dict(sorted(run["counts"].items())),
            ),
            run["labels"],
        ]
        + ([headlines.get(run["id"])] if headlines is not None else [])
        for run in runs
    ]
    names: list[str | tuple[str, str]] = ["run", "started", "state", "suite", "device"]
    names += [("results", "count"), ("labels", "labels")]
    if headlines is not None:
        names.append("headline")
    return View(f"{len(runs)} runs", columns(*names), rows)


def results_view(results: list[dict]) -> View:
    rows = [
        [r["run_id"], r["case"], r["mode"], r["status"], r["stage"], r["grade"], outcome(r)]
        for r in results
    ]
    return View(
        f"{len(results)} results",
        columns("run", "case", "mode", "status", "stage", "grade", ("detail", "detail")),
        rows,
    )


def _note(case: dict) -> str | None:
    """The skip reason; for an op case, whether backward is checked too."""
    if case.get("skip_reason"):
        return case["skip_reason"]
    if "autograd" in case:
        return "forward + backward" if case["autograd"] else "forward"
    return None


def cases_view(suite: str, cases: list[dict], *, params: bool) -> View:
    """``cases``: rows from ``Case.describe()`` with ``last_status`` (and ``params`` for model
    cases, ``samples`` for op cases) added."""
    sizes = [k for k in ("params", "samples") if any(k in c for c in cases)] if params else []
    cols = (
        (Column("case"), Column("tags"))
        + tuple(Column(k, "count") for k in sizes)
        + (Column("last status"), Column("note"))
    )
    rows = [
        [
            c["case"],
            list(c.get("tags") or ()),
            *[c.get(k) for k in sizes],
            c.get("last_status"),
            _note(c),
        ]
        for c in cases
    ]
    return View(f"suite {suite}: {len(cases)} cases", cols, rows)
