"""Every page as data: titled tables (Views), charts built from them, and a few header values.

A page builder reads the knowledge base only through the Store protocol and the views, so the
same page comes out of SQLite or PostgreSQL; the HTML template, the JSON twin
(``Page.to_dict``) and the one-file report all render one ``Page``. Links are made by a
``Links`` object: the server's paths, or none in a report that opens from disk.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from torchport.interfaces.render import ENVIRONMENT_KEYS
from torchport.interfaces.web import charts as ch
from torchport.kb import StoreError
from torchport.views import build_views
from torchport.views.base import View
from torchport.views.case_history import exact_glob, history_view, latest_failure, parity_view
from torchport.views.compare import Comparison, Kept, compare_again, compare_runs
from torchport.views.compare_tables import (
    LIST_ROWS,
    LISTS,
    after_row,
    comparison_views,
    environment_view,
    list_length,
    list_view,
    notes_view,
    transitions_view,
)
from torchport.views.headline import run_headline, run_headlines
from torchport.views.host_op import full_op_name, op_results_view, op_runs_view
from torchport.views.listing import results_view, runs_view
from torchport.views.placement import host_op_ranking
from torchport.views.run_summary import GROUPS_SHOWN, groups_view, summary_views
from torchport.views.search_more import more_hits
from torchport.views.selection import is_run_id, resolve_run
from torchport.views.train import loss_curves

PAGE_ROWS = 100  # results per page of a large run, an op or a search
# Past this many results a run's page shows its summary and a page of results at a time (a
# whole hf run, 392 results, shows every view): 2000 results took 190 ms to render with
# synthetic records, 5000 took 750 ms (benchmarks/web_pages.py has the target).
FULL_VIEWS_UP_TO = 1000
HISTORY_ROWS = 200  # newest results of a case shown in its history
COMPARE_WITH = 20  # runs of the same suite offered for a comparison on a run's page
RUN_FILTERS = ("device", "suite", "state", "label")


class NotFound(LookupError):
    """A page for something the knowledge base does not hold (HTTP 404)."""


class Links:
    """The paths pages link to; ``Links(None)`` links nothing (a report read from disk)."""

    def __init__(self, root: str | None = ""):
        self.root = root

    def _path(self, path: str, query: dict | None = None) -> str | None:
        if self.root is None:
            return None
        query = {k: v for k, v in (query or {}).items() if v not in (None, "")}
        return self.root + path + (f"?{urlencode(query)}" if query else "")

    def runs(self, **filters: str) -> str | None:
        return self._path("/", filters)

    def run(self, run_id: str, offset: int | None = None) -> str | None:
        return self._path(f"/runs/{quote(run_id, safe='')}", {"offset": offset})

    def evaluation(self, evaluation: str) -> str | None:
        return self._path(f"/evaluations/{quote(evaluation, safe='')}")

    def case(self, case: str) -> str | None:
        return self._path(f"/cases/{quote(case, safe='/')}")

    def op(self, op: str, offset: int | None = None) -> str | None:
        return self._path(f"/ops/{quote(op, safe='')}", {"offset": offset})

    def compare(
        self,
        a: str,
        b: str,
        *,
        rows: str | None = None,
        offset: int = 0,
        after: dict | None = None,
    ) -> str | None:
        """``rows``: one list of the comparison (compare_tables.LISTS), a page from ``offset``
        (``after``: the key of the row before it, compare_tables.after_row)."""
        query = {"a": a, "b": b, "list": rows, "offset": offset or None}
        query |= {f"after_{k}": v for k, v in (after or {}).items() if v is not None}
        return self._path("/compare", query)

    def search(self, text: str, offset: int | None = None) -> str | None:
        return self._path("/search", {"q": text, "offset": offset})

    def trace(self, run_id: str, case: str, mode: str) -> str | None:
        return self._path(f"/runs/{quote(run_id, safe='')}/trace", {"case": case, "mode": mode})


@dataclass
class Table:
    """A View to show, with a link (or None) for each of its cells."""

    name: str
    view: View
    hrefs: list[list[str | None]]


@dataclass
class Page:
    kind: str  # runs, run, case, compare, op, search
    title: str
    tables: list[Table] = field(default_factory=list)
    charts: list[ch.Chart] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON twin: the views' values and the charts' data the page shows."""
        return {
            "page": self.kind,
            "title": self.title,
            **self.data,
            "views": {t.name: t.view.to_dict() for t in self.tables},
            "charts": [c.to_dict() for c in self.charts],
        }


def slug(title: str) -> str:
    """``Newly failing (3)`` -> ``newly-failing``: a table's name from its title."""
    return re.sub(r"[^a-z0-9]+", "-", title.split(" (")[0].lower()).strip("-")


def table(name: str, view: View, links: Links, run_id: str | None = None) -> Table:
    """Link the cells a reader follows: cases, runs, ops and (on a run's page) traces."""
    names = view.names
    hrefs = []
    for row in view.rows:
        values = dict(zip(names, row, strict=True), run_id=run_id)
        hrefs.append(
            [_href(c.name, v, values, links) for c, v in zip(view.columns, row, strict=True)]
        )
    return Table(name, view, hrefs)


def _href(column: str, value: Any, row: dict, links: Links) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if column == "case":
        return links.case(value)
    if column == "run":
        return links.run(value)
    if column == "op":
        return links.op(value)
    if column == "trace" and isinstance(row.get("case"), str) and row.get("run_id"):
        return links.trace(row["run_id"], row["case"], row.get("mode") or "")
    return None


def tables(views: dict[str, View], links: Links, run_id: str | None = None) -> list[Table]:
    return [table(name, view, links, run_id) for name, view in views.items()]


# -- runs ------------------------------------------------------------------------------------
def runs_page(store, links: Links, filters: dict[str, str]) -> Page:
    """Every run, newest first, filtered by device, suite, state and a ``key=value`` label."""
    every = store.runs()
    label = filters.get("label") or ""
    key, _, value = label.partition("=")
    chosen = [
        r
        for r in every
        if all(not filters.get(k) or r[k] == filters[k] for k in ("device", "suite", "state"))
        and (not key or (r.get("labels") or {}).get(key) == value)
    ]
    choices = {k: sorted({str(r[k]) for r in every}) for k in ("device", "suite", "state")} | {
        "label": sorted({f"{k}={v}" for r in every for k, v in (r.get("labels") or {}).items()})
    }
    totals: dict[str, int] = {}
    for r in chosen:
        for status, n in r["counts"].items():
            totals[status] = totals.get(status, 0) + n
    view = runs_view(chosen, run_headlines(store, chosen))
    view.notes.append(
        "results of the listed runs: "
        + (
            ", ".join(f"{s} {n}" for s, n in sorted(totals.items(), key=lambda kv: -kv[1]))
            or "none"
        )
    )
    return Page(
        "runs",
        "Runs",
        [table("runs", view, links)],
        data={"filters": {k: filters.get(k) or "" for k in RUN_FILTERS}, "choices": choices},
    )


# -- one run ----------------------------------------------------------------------------------
def run_header(store, run: dict) -> dict:
    environments = store.get_run(run["id"], plan=False, environments=True)["environments"]
    brief = {k: v for k, v in run.items() if k != "plan"}
    brief["planned"] = len(run.get("plan") or [])
    return {
        "run": brief,
        "environments": [
            {k: env[k] for k in ENVIRONMENT_KEYS if env.get(k) not in (None, {}, "")}
            for env in environments
        ],
    }


def run_page(store, run_id: str, links: Links, *, offset: int = 0) -> Page:
    """Header, then the run's views and plots; a run past FULL_VIEWS_UP_TO results shows its
    status counts, failures by signature and one page of results at a time."""
    run = _get_run(store, run_id)
    total = store.results(run_id=run["id"], count=True)
    data = run_header(store, run) | {"results_total": total, "summary": total > FULL_VIEWS_UP_TO}
    data["headline"] = run_headline(store, run).to_dict()
    notes = store.notes(run_id=run["id"])
    if data["summary"]:
        views = summary_views(store, run)
        page = store.results(run_id=run["id"], limit=PAGE_ROWS, offset=offset)
        views["results"] = results_view(page)
        data["paging"] = paging(offset, len(page), total, lambda o: links.run(run["id"], o))
        charts: list[ch.Chart] = []
    else:
        results = store.results(run_id=run["id"])
        views, charts = run_views(store, run, results)
    if notes:
        views["notes"] = notes_view(notes)
    if links.root is not None:  # the newest runs of the suite, newest first
        others = [r["id"] for r in store.runs(suite=run["suite"], complete=False)]
        data["compare_with"] = [
            {"id": other, "href": links.compare(other, run["id"])}
            for other in others[:COMPARE_WITH]
            if other != run["id"]
        ]
    return Page("run", f"Run {run['id']}", tables(views, links, run["id"]), charts, data)


def run_views(store, run: dict, results: list[dict]) -> tuple[dict[str, View], list[ch.Chart]]:
    """The registered views, failures by signature, the host-op ranking and loss curves, in
    reading order, with the plots drawn from them."""
    built = build_views(run, results)
    views: dict[str, View] = {}
    for name, view in built.items():
        views[name] = view
        if name == "matrix":
            groups = store.failures(run["id"], limit=GROUPS_SHOWN)
            if groups:
                views["failures"] = groups_view(
                    "Failures by error signature", groups, store.failures(run["id"], count=True)
                )
        if name == "placement" and (ranking := host_op_ranking(run, results)):
            views["host_ops"] = ranking
        if name == "train" and (curves := loss_curves(run, results)):
            views["loss"] = curves
    charts: list[ch.Chart] = []
    for name, make in (
        ("coverage", ch.coverage_chart),
        ("perf", ch.throughput_chart),
        ("compile", ch.compile_chart),
        ("loss", ch.loss_charts),
    ):
        if name in views and views[name].columns:
            charts += make(views[name])
    return views, charts


# -- one case ---------------------------------------------------------------------------------
def case_page(store, case: str, links: Links) -> Page:
    """A case's history across runs (newest HISTORY_ROWS results), plots of its step and
    compile times, parity per tensor of its latest result per mode, the latest traceback."""
    pattern = exact_glob(case)
    total = store.results(case_glob=pattern, count=True)
    if not total:
        raise NotFound(f"no results for case '{case}' in {store.url}; search for it instead")
    results = store.results(
        case_glob=pattern, limit=HISTORY_ROWS, offset=max(0, total - HISTORY_ROWS)
    )
    runs = {r["id"]: r for r in store.runs()}
    history = history_view(case, results, runs)
    if total > len(results):
        history.notes.append(f"the newest {len(results)} of {total} results")
    views = {"history": history}
    latest: dict[str, dict] = {}
    for r in results:
        latest[r["mode"]] = r
    for mode, r in latest.items():
        if parity := parity_view(r):
            parity.title += f" (latest {mode})"
            views[f"parity-{mode}"] = parity
    notes = store.notes(case=case)
    if notes:
        views["notes"] = notes_view(notes)
    failure = latest_failure(results)
    order = list(dict.fromkeys(r["run_id"] for r in results))
    data = {
        "case": case,
        "results_total": total,
        "latest_failure": None
        if failure is None
        else {k: failure.get(k) for k in ("run_id", "mode", "status", "stage", "error")},
        "compare": [
            {"a": a, "b": b, "href": links.compare(a, b)}
            for a, b in zip(order, order[1:], strict=False)
        ],
    }
    torch_by_run = {
        r: str(environments[0].get("torch"))
        for r in order
        if r in runs
        and (environments := store.get_run(r, plan=False, environments=True)["environments"])
    }
    charts = ch.history_charts(history, torch_by_run)
    return Page("case", f"Case {case}", tables(views, links), charts, data)


# -- compare ----------------------------------------------------------------------------------
class CompareMemo:
    """The server's last few comparisons, so a second look at one does not join two runs of
    100 000 results again (1.3 s on this machine, benchmarks/web_pages.py). A comparison is
    kept with the version of both runs it was read from (each one's state, end time and
    result count: results are only ever added, so a resumed or still running run has a new
    one); the store's one read of the next look reads the runs and their notes, and joins
    them again only where a version changed (views/compare.py ``compare_again``). Notes are
    read fresh on every request."""

    def __init__(self, size: int = 4):
        self.size = size
        self._kept: OrderedDict[tuple, Kept] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, store, run_a: str, run_b: str, **reads) -> Comparison:
        """``compare_runs(store, run_a, run_b, **reads)``, kept."""
        frozen = tuple(
            (k, tuple(sorted(v.items())) if isinstance(v, dict) else v)
            for k, v in sorted(reads.items())
        )
        key = (run_a, run_b, frozen)
        with self._lock:
            held = self._kept.get(key)
        kept = compare_again(store, run_a, run_b, held, **reads)
        with self._lock:
            self._kept[key] = kept
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return kept[1]


def compare_page(
    store,
    a: str,
    b: str,
    links: Links,
    *,
    every: bool = False,
    rows: str | None = None,
    offset: int = 0,
    after: dict | None = None,
    memo: CompareMemo | None = None,
) -> Page:
    """``torchport compare`` as a page: A and B are run ids, ``latest`` or selectors. The
    first LIST_ROWS pairs of each list, counted and picked by the database, with a link to
    each list that holds more; ``rows``: that list alone, PAGE_ROWS pairs from ``offset``.
    A next page is read after the last row shown (``after``), at the cost of the first; a
    page reached by its offset alone reads the list up to its end. ``every``: every row of
    every list (the one-file report; 30 MB of HTML for two runs of 100 000, which the
    server leaves to ``torchport compare --json``)."""
    # A run named by its id is read by the comparison itself (a missing one: the same line)
    run_a, run_b = (spec if is_run_id(spec) else resolve_run(store, spec) for spec in (a, b))
    if rows is not None and rows not in LISTS:
        raise NotFound(f"no list '{rows}' in a comparison; one of: {', '.join(LISTS)}")
    after = after if rows not in (None, "host_ops") else None
    limit = None if every else (PAGE_ROWS if after else offset + PAGE_ROWS) if rows else LIST_ROWS
    rows = None if every else rows
    reads: dict[str, Any] = {"limit": limit, "rows": rows, "after": after}
    comparison = (
        memo.get(store, run_a, run_b, **reads)
        if memo is not None
        else compare_runs(store, run_a, run_b, **reads)
    )
    data: dict = {"a": run_a, "b": run_b, "common": comparison.common, "every": every}
    if rows is None:
        views = comparison_views(comparison, limit=limit)
        data["more"] = [
            {"list": name, "rows": total, "href": links.compare(run_a, run_b, rows=name)}
            for name in LISTS
            if not every and (total := list_length(comparison, name)) > LIST_ROWS
        ]
    else:
        views = [environment_view(comparison), transitions_view(comparison)]
        held_from = offset if after else 0
        shown = list_view(comparison, rows, PAGE_ROWS, offset, held_from)
        views += [shown] if shown is not None else []
        count = len(shown.rows) if shown else 0
        data |= {
            "list": rows,
            "paging": paging(
                offset,
                count,
                list_length(comparison, rows),
                lambda o: links.compare(run_a, run_b, rows=rows, offset=o),
            ),
        }
        if data["paging"]["next"] and shown and (key := after_row(rows, shown.rows[-1])):
            data["paging"]["next"] = links.compare(
                run_a, run_b, rows=rows, offset=offset + count, after=key
            )
    title = f"Compare {run_a} -> {run_b}" + (f": {rows}" if rows else "")
    return Page("compare", title, [table(slug(v.title), v, links) for v in views], data=data)


# -- an op ------------------------------------------------------------------------------------
def op_page(store, op: str, links: Links, *, offset: int = 0) -> Page:
    """Which runs (devices, releases) and cases ran ``op`` on the host."""
    name = full_op_name(op)
    listed = store.runs()
    by_run = store.results(fallback_op=name, by_run=True)
    counts = [(r, by_run.get(r["id"], 0)) for r in listed]
    total = sum(by_run.values())
    page = store.results(fallback_op=name, limit=PAGE_ROWS, offset=offset)
    views = {
        "runs": op_runs_view(name, counts),
        "results": op_results_view(name, page, {r["id"]: r for r in listed}),
    }
    data = {"op": name, "paging": paging(offset, len(page), total, lambda o: links.op(op, o))}
    return Page("op", f"Op {name} on the host", tables(views, links), data=data)


# -- search -----------------------------------------------------------------------------------
def search_page(store, text: str, links: Links, *, offset: int = 0) -> Page:
    """Full text over case ids, errors and tracebacks, best first, a page at a time; notes
    that match are listed apart."""
    text = text.strip()
    if not text:
        return Page("search", "Search", data={"q": "", "paging": None})
    found = store.search(text, limit=PAGE_ROWS, offset=offset)
    total = store.search(text, count=True)
    views = more_hits(store, text, PAGE_ROWS) if offset == 0 else {}
    views["results"] = results_view(found)
    views["results"].title = f"{total} results for {text!r}"
    notes = store.search(text, limit=PAGE_ROWS, notes=True)
    if notes:
        views["notes"] = notes_view(notes, "Notes that match")
    data = {"q": text, "paging": paging(offset, len(found), total, lambda o: links.search(text, o))}
    return Page("search", f"Search {text}", tables(views, links), data=data)


# -- helpers ----------------------------------------------------------------------------------
def paging(offset: int, shown: int, total: int, href) -> dict:
    """Where this page sits, with links to the pages either side."""
    return {
        "offset": offset,
        "shown": shown,
        "total": total,
        "prev": href(max(0, offset - PAGE_ROWS)) if offset > 0 else None,
        "next": href(offset + PAGE_ROWS) if offset + shown < total else None,
    }


def _get_run(store, run_id: str) -> dict:
    try:
        return store.get_run(run_id)
    except StoreError as exc:
        raise NotFound(str(exc)) from None
