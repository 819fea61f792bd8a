"""The release note of a matrix as a page (``/matrix/NAME``): each environment's latest run
(labels ``matrix``, ``matrix_env``; the baseline named by ``matrix_baseline``), each other
environment compared with the baseline: the line, a link to the whole comparison and to
every list, and the comparison's tables."""

from __future__ import annotations

from torchport.interfaces.web.pages import Links, NotFound, Page, Table, table
from torchport.views.base import Column, View
from torchport.views.compare_tables import LISTS, comparison_views, list_length
from torchport.views.release_note import release_note


def matrix_sides(store, name: str) -> list[tuple[str, str | None, str | None]]:
    """(environment, its newest run, no lock) for the matrix ``name``, the baseline first."""
    runs = [r for r in store.list_runs() if (r.get("labels") or {}).get("matrix") == name]
    if not runs:
        raise NotFound(f"no runs of a matrix '{name}' (labels matrix={name})")
    newest: dict[str, dict] = {}
    for run in runs:  # newest first
        newest.setdefault(run["labels"].get("matrix_env", "?"), run)
    baseline = runs[0]["labels"].get("matrix_baseline")
    order = sorted(newest, key=lambda env: (env != baseline, env))
    return [(env, newest[env]["id"], None) for env in order]


def matrix_page(store, name: str, links: Links) -> Page:
    note = release_note(store, name, matrix_sides(store, name))
    rows = [[p.baseline, p.other, p.run_a, p.run_b, p.headline] for p in note.pairs]
    summary = View(
        "Release note",
        (
            Column("baseline"),
            Column("environment"),
            Column("run"),
            Column("compared run"),
            Column("what changed"),
        ),
        rows,
        list(note.problems),
    )
    tables: list[Table] = [table("release-note", summary, links)]
    pairs = []
    for i, pair in enumerate(note.pairs):
        cmp = pair.comparison
        pairs.append(
            {
                "baseline": pair.baseline,
                "other": pair.other,
                "headline": pair.headline,
                "compare": links.compare(pair.run_a, pair.run_b),
                "lists": [
                    {
                        "list": list_name,
                        "rows": list_length(cmp, list_name),
                        "href": links.compare(pair.run_a, pair.run_b, rows=list_name),
                    }
                    for list_name in LISTS
                ],
            }
        )
        for j, view in enumerate(comparison_views(cmp)):
            view.title = f"{pair.other}: {view.title}"
            tables.append(table(f"pair-{i}-{j}", view, links))
    return Page("matrix", f"Matrix {name}", tables, data={"matrix": name, "pairs": pairs})
