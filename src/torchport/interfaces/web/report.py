"""``torchport report``: a run's page (and a comparison) in one file to attach to a decision.

HTML: the server's pages with styles, uPlot and the chart script inline and no links, so the
file opens from disk and fetches nothing. Markdown: the same tables as text (plots are in the
HTML form only).
"""

from __future__ import annotations

from torchport.interfaces.formats import cell
from torchport.interfaces.web.html import render_report
from torchport.interfaces.web.pages import Links, Page, compare_page, run_page

NO_LINKS = Links(None)


def report_pages(store, run_id: str, other: str | None = None) -> list[Page]:
    """RUN's page, then OTHER -> RUN compared when ``other`` is given."""
    pages = [run_page(store, run_id, NO_LINKS)]
    if other:
        pages.append(compare_page(store, other, run_id, NO_LINKS, every=True))
    return pages


def html_report(pages: list[Page]) -> str:
    return render_report(pages, " / ".join(p.title for p in pages))


# Stored text is data, never markup: a backslash before each character that could open HTML
# (a tag, an entity), a link or image, a code span, or end a table cell.
_MARKUP = str.maketrans({ch: "\\" + ch for ch in "\\|<>&[]`"})


def _md(text: str) -> str:
    """Stored text safe inside a Markdown line or table row: shown as it is, never as HTML,
    a link or a code span (Markdown renderers pass raw HTML through)."""
    return " ".join(text.translate(_MARKUP).splitlines())


def markdown_report(pages: list[Page]) -> str:
    lines: list[str] = []
    for page in pages:
        lines += [f"# {_md(page.title)}", ""]
        run = page.data.get("run")
        if run:
            labels = cell(run.get("labels") or {}, "labels")
            lines += [
                f"- state {run['state']}, suite {run['suite']}, device {run['device']}, "
                f"labels {_md(labels)}",
                f"- {page.data['results_total']} / {run['planned']} planned results recorded",
                *(
                    [f"- headline: {_md(' · '.join(b['text'] for b in head['badges'].values()))}"]
                    if (head := page.data.get("headline"))
                    else []
                ),
                f"- command: {_md(run['command'])}",
            ]
            for env in (page.data.get("environments") or [])[:1]:
                lines += [f"- {k}: {_md(cell(v, 'text'))}" for k, v in env.items()]
            lines.append("")
        if page.charts:
            lines += [f"Plots ({', '.join(c.title for c in page.charts)}): in the HTML report.", ""]
        for t in page.tables:
            view = t.view
            lines += [f"## {_md(view.title)}", ""]
            if view.columns:
                lines.append("| " + " | ".join(_md(c.name) or " " for c in view.columns) + " |")
                lines.append("|" + "---|" * len(view.columns))
                lines += [
                    "| "
                    + " | ".join(
                        _md(cell(v, c.kind)) for v, c in zip(row, view.columns, strict=True)
                    )
                    + " |"
                    for row in view.rows
                ]
                lines.append("")
            lines += [f"- {_md(n)}" for n in view.notes]
            lines.append("")
    return "\n".join(lines)
