"""An evaluation's scorecard in the terminal (the CLI's summary), as one self-contained HTML
file (the dashboard's page with no links), and its compatibility table as sorted lines."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from torchport.interfaces.formats import safe
from torchport.interfaces.render import print_view
from torchport.views.compat import compat_counts, compat_lines
from torchport.views.scorecard import Scorecard

# The tone's colour in a terminal (the page uses the stylesheet's).
TONE_STYLE = {
    "good": "bold green",
    "warn": "bold yellow",
    "bad": "bold red",
    "info": "bold blue",
    "none": "dim",
}


def scorecard_table(card: Scorecard) -> Table:
    title = f"Scorecard: {card.device}" + (f" against {card.against}" if card.against else "")
    out = Table(title=safe(f"{title} ({card.evaluation})"), show_lines=True, expand=True)
    out.add_column("question", ratio=2)
    out.add_column("", no_wrap=True)
    out.add_column("answer", ratio=6)
    out.add_column("evidence", ratio=2)
    for a in card.answers:
        runs = sorted({e["run"] for e in a.evidence})
        out.add_row(
            Text(safe(a.question)),
            Text(a.tone, style=TONE_STYLE.get(a.tone, "")),
            Text(safe(a.answer)),
            Text(safe(" ".join(runs))),
        )
    return out


def print_scorecard(console, card: Scorecard) -> None:
    from torchport.interfaces.web.scorecard_page import notes_view

    console.print(scorecard_table(card))
    console.print(
        f"budget {card.budget_s:.0f} s, plan {card.plan_estimate_s:.0f} s, ran "
        f"{card.elapsed_s:.0f} s; 'torchport show RUN' shows a run's evidence",
        markup=False,
        highlight=False,
    )
    console.print()
    if card.not_evaluated:
        print_view(console, card.not_evaluated_view())
        console.print()
    if card.notes:
        print_view(console, notes_view(card))
        console.print()
    counts = compat_counts(card.compat)
    console.print(
        f"compatibility table: {len(card.compat)} ops seen: "
        + ", ".join(f"{n} {v}" for v, n in counts.items())
        + " (--compat FILE writes it)",
        markup=False,
        highlight=False,
    )


def write_report(card: Scorecard, path: str) -> str:
    from torchport.interfaces.web.html import render_report
    from torchport.interfaces.web.pages import Links
    from torchport.interfaces.web.scorecard_page import card_page

    text = render_report([card_page(card, Links(None))], f"Evaluation {card.evaluation}")
    _write(path, text)
    return f"scorecard report: {path} ({len(text.encode()) / 1024:.0f} KiB, html)"


def write_compat(card: Scorecard, path: str) -> str:
    lines = compat_lines(card.compat)
    _write(path, "op\tverdict\tdtypes\tclass\tdetail\n" + "".join(f"{x}\n" for x in lines))
    return f"compatibility table: {path} ({len(lines)} ops)"


def _write(path: str, text: str) -> None:
    """OutputError (interfaces/output.py) when the file cannot be written."""
    from torchport.interfaces.output import output_file

    with output_file(path) as f:
        f.write(text)
