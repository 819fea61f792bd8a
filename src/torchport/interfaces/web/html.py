"""Pages as HTML (Jinja2, autoescaped): the server's pages, and the one-file report with its
stylesheet and scripts inlined so it opens from disk and fetches nothing.

Cell text comes from ``interfaces.formats.cell`` (the same digits and units as the terminal
tables); a status or an outcome also gets a CSS class so the matrix is coloured by status, with
the placement grade marked.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from torchport.interfaces.formats import cell
from torchport.interfaces.web.pages import Page
from torchport.records.status import STATUS
from torchport.views.base import Column, Outcome

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
STYLES = ("uPlot.min.css", "app.css")
SCRIPTS = ("uPlot.iife.min.js", "charts.js")
_CLASS = re.compile(r"[^a-z0-9_]")


def cell_class(value: Any, column: Column) -> str:
    """``st-<status> gr-<grade>`` for an outcome or a status cell, else the column's kind."""
    if isinstance(value, Outcome):
        classes = [f"st-{_CLASS.sub('', value.status)}"]
        if value.grade:
            classes.append(f"gr-{_CLASS.sub('', value.grade)}")
        return " ".join(classes)
    if column.name in ("status", "A", "B") and isinstance(value, str):
        return f"st-{_CLASS.sub('', value.split(' @')[0])}"
    return f"k-{column.kind}"


@cache
def status_css() -> Markup:
    """A colour per status, by its look in records/status.py: a new status is coloured
    without touching the stylesheet (whose variables name the looks)."""
    rules = (f".st-{name} {{ background: var(--{s.look}); }}" for name, s in STATUS.items())
    return Markup("\n".join(rules))


def charts_json(page: Page) -> str:
    """The charts' data for the page script, safe inside <script> (no ``</`` can close it)."""
    text = json.dumps([c.to_dict() for c in page.charts], allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        cell=cell, cell_class=cell_class, charts_json=charts_json, status_css=status_css
    )
    return env


@cache
def inline_assets() -> dict[str, str]:
    """Stylesheets and scripts as text, for a page that must stand alone."""
    return {
        "css": "\n".join((STATIC / name).read_text() for name in STYLES),
        "js": "\n".join((STATIC / name).read_text() for name in SCRIPTS),
    }


def render_page(page: Page, *, root: str = "") -> str:
    """One page of the server: assets from /static, links from the page's tables."""
    return (
        environment()
        .get_template("page.html")
        .render(pages=[page], title=page.title, root=root, inline=None, server=True)
    )


def render_report(pages: list[Page], title: str) -> str:
    """Pages in one self-contained file: styles and scripts inline, no links out."""
    return (
        environment()
        .get_template("page.html")
        .render(pages=pages, title=title, root="", inline=inline_assets(), server=False)
    )
