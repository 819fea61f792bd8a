"""Case x mode -> the outcome: status, placement grade, failing stage and one key figure."""

from __future__ import annotations

from torchport.views.base import Column, View, outcome


def build(run: dict, results: list[dict]) -> View | None:
    modes = list(dict.fromkeys((run.get("config") or {}).get("modes") or
                               [r["mode"] for r in results]))
    by_case: dict[str, dict] = {}
    for r in results:
        by_case.setdefault(r["case"], {})[r["mode"]] = r
    rows = [[case] + [outcome(row[m]) if m in row else None for m in modes]
            for case, row in by_case.items()]
    notes = [f"{r['case']} ({r['mode']}): reference: {r['findings']['reference']['label']}"
             for r in results if ((r.get("findings") or {}).get("reference") or {}).get("kind")
             == "float32"]
    return View("Results", (Column("case"),) + tuple(Column(m, "outcome") for m in modes),
                rows, notes)
