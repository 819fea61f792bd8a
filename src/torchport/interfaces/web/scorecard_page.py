"""An evaluation's scorecard as a page (``/evaluations/ID``, its JSON twin ``.json``): the
questions with their answers and colours, each linked to its evidence (a run's page, at the
view that holds it), what was not evaluated, the notes and decisions, the runs, and the
compatibility table. The one-file report renders the same page with no links."""

from __future__ import annotations

from torchport.interfaces.web.pages import Links, NotFound, Page, table
from torchport.views.base import View, columns
from torchport.views.compat import compat_counts
from torchport.views.scorecard import Scorecard, scorecard


def evidence_links(card: Scorecard, links: Links) -> list[list[dict]]:
    """Per answer: {text, href} for each run behind it (href None in a report)."""
    out = []
    for answer in card.answers:
        items = []
        for e in answer.evidence:
            href = links.run(e["run"])
            items.append(
                {
                    "text": f"{e['part']} ({e['side']}): {e['view']}",
                    "run": e["run"],
                    "href": f"{href}#view-{e['view']}" if href else None,
                }
            )
        out.append(items)
    return out


def compat_view(card: Scorecard) -> View:
    counts = compat_counts(card.compat)
    return View(
        f"Compatibility table: {card.device}",
        columns("op", "verdict", "dtypes", "class", "detail", "seen in"),
        [
            [
                r.op,
                r.verdict,
                ", ".join(r.dtypes),
                r.evidence_class or "",
                r.detail,
                ", ".join(r.seen_in),
            ]
            for r in card.compat
        ],  # fmt: skip
        [
            ", ".join(f"{n} {v}" for v, n in counts.items())
            + f" of {len(card.compat)} ops seen; 'torchport evaluate --scorecard "
            f"{card.evaluation} --compat FILE' writes it as sorted lines to diff"
        ],
    )


def notes_view(card: Scorecard) -> View:
    return View(
        "Notes and decisions",
        columns("run", "case", "author", "when", "note"),
        [
            [
                n["run_id"],
                n.get("case") or "",
                n.get("author") or "",
                n.get("created_at") or "",
                n["text"],
            ]
            for n in card.notes
        ],  # fmt: skip
        [] if card.notes else ["none yet: 'torchport note RUN \"why\"' records a decision"],
    )


def evaluations_page(store, links: Links) -> Page:
    """Every evaluation in the knowledge base, newest first, each linked to its scorecard."""
    from torchport.views.evaluation import evaluations

    rows = [[e["evaluation"], e["device"], e["against"] or "", e["started_at"], e["runs"]]
            for e in evaluations(store)]  # fmt: skip
    view = View(
        "Evaluations",
        columns("evaluation", "device", "against", "started", ("runs", "count")),
        rows,
        ["'torchport evaluate --device X' makes one"] if not rows else [],
    )
    found = table("evaluations", view, links)
    found.hrefs = [[links.evaluation(r[0])] + [None] * 4 for r in rows]
    return Page("evaluations", "Evaluations", [found], data={})


def scorecard_page(store, evaluation: str, links: Links) -> Page:
    try:
        card = scorecard(store, evaluation)
    except LookupError as exc:
        raise NotFound(str(exc)) from None
    return card_page(card, links)


def card_page(card: Scorecard, links: Links) -> Page:
    tables = [
        table("not-evaluated", card.not_evaluated_view(), links),
        table("notes", notes_view(card), links),
        table("runs", card.runs_view(), links),
        table("compat", compat_view(card), links),
    ]
    title = f"Evaluation of {card.device}" + (f" against {card.against}" if card.against else "")
    return Page(
        "evaluation",
        title,
        tables,
        data={"scorecard": card.to_dict(), "evidence": evidence_links(card, links)},
    )
