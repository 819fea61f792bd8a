"""The release note of a matrix as a page (``/matrix/NAME``): each environment's latest run
(labels ``matrix``, ``matrix_env``; the baseline named by ``matrix_baseline``), each other
environment compared with the baseline: the line, a link to the whole comparison and to
every list, and the comparison's tables."""

from __future__ import annotations

from torchport.interfaces.web.pages import Links, NotFound, Page, Table, table
from torchport.views.base import Column, View
from torchport.views.compare_tables import LISTS, comparison_views, list_length
from torchport.views.release_note import release_note

DEFAULT_RUN = "run"  # matrix/run.py: the one run [run] describes


def matrix_groups(
    store, name: str
) -> list[tuple[str | None, list[tuple[str, str | None, str | None]]]]:
    """(run name or None, [(environment, its newest run of that name, no lock)]) for the
    matrix ``name``: each run the baseline made, the baseline first."""
    runs = [r for r in store.runs() if (r.get("labels") or {}).get("matrix") == name]
    if not runs:
        raise NotFound(f"no runs of a matrix '{name}' (labels matrix={name})")
    newest: dict[tuple[str, str], dict] = {}
    for run in runs:  # newest first
        labels = run["labels"]
        key = (labels.get("matrix_run", DEFAULT_RUN), labels.get("matrix_env", "?"))
        newest.setdefault(key, run)
    baseline = runs[0]["labels"].get("matrix_baseline")
    groups: list[tuple[str | None, list[tuple[str, str | None, str | None]]]] = []
    for run_name in sorted({r for r, _env in newest}):
        envs = sorted(
            (env for r, env in newest if r == run_name), key=lambda env: (env != baseline, env)
        )
        if envs and envs[0] == baseline:
            sides: list[tuple[str, str | None, str | None]] = [
                (env, newest[(run_name, env)]["id"], None) for env in envs
            ]
            groups.append((None if run_name == DEFAULT_RUN else run_name, sides))
    return groups


def matrix_page(store, name: str, links: Links) -> Page:
    from torchport.views.release_note import ReleaseNote

    note = ReleaseNote(matrix=name)
    for run_name, sides in matrix_groups(store, name):
        part = release_note(store, name, sides, run_name=run_name)
        note.pairs += part.pairs
        note.problems += part.problems
    rows = [[p.baseline, p.other, p.run_a, p.run_b, p.headline, p.run_name or "-"]
            for p in note.pairs]  # fmt: skip
    summary = View(
        "Release note",
        (
            Column("baseline"),
            Column("environment"),
            Column("run"),
            Column("compared run"),
            Column("what changed"),
            Column("which run"),
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
                "run_name": pair.run_name,
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
            which = f" ({pair.run_name})" if pair.run_name else ""
            view.title = f"{pair.other}{which}: {view.title}"
            tables.append(table(f"pair-{i}-{j}", view, links))
    return Page("matrix", f"Matrix {name}", tables, data={"matrix": name, "pairs": pairs})
