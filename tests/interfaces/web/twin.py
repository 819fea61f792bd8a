"""What a page shows, from its JSON twin: the text each cell must read, rebuilt from the JSON
values the same way the page formats them (a composite cell comes back as its value type)."""

from __future__ import annotations

from dataclasses import fields

from torchport.interfaces.formats import cell
from torchport.views.base import (
    Annotated,
    Breaks,
    Copies,
    Exceeded,
    Fraction,
    Graphs,
    Outcome,
    Share,
    Span,
)
from torchport.views.listing import Tally

COMPOSITES = {
    frozenset(f.name for f in fields(cls)): cls
    for cls in (Annotated, Breaks, Copies, Exceeded, Fraction, Graphs, Outcome, Share, Span, Tally)
}


def value_of(plain, kind: str):
    """The cell value a JSON value stands for (``View.to_dict`` wrote composites as objects)."""
    if isinstance(plain, dict) and isinstance(plain.get("badges"), dict):  # a run's headline
        return " · ".join(b["text"] for b in plain["badges"].values())
    if isinstance(plain, dict) and kind not in ("labels", "op_counts"):
        cls = COMPOSITES.get(frozenset(plain))
        if cls is not None:
            return cls(**plain)
    return plain


def shown(view: dict) -> dict:
    """A view of the JSON twin as the page must show it: title, column names, cell texts."""
    kinds = [c["kind"] for c in view["columns"]]
    return {
        "title": view["title"],
        "columns": [c["name"] for c in view["columns"]],
        "rows": [
            [" ".join(cell(value_of(v, k), k).split()) for v, k in zip(row, kinds, strict=True)]
            for row in view["rows"]
        ],
        "notes": [" ".join(n.split()) for n in view["notes"]],
    }
