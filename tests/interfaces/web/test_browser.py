"""The dashboard in a real browser (Debian's Chromium through Playwright): click from the runs to
a run to a case to a comparison, every page's tables equal its JSON twin, the plots are drawn,
and nothing is fetched from outside this machine (such requests are aborted and recorded). The
one-file report is opened from disk.

The default run reads a knowledge base written through the store (``recorded_kb``); the same
checks over one made by two real smoke runs (``smoke_kb``, minutes to make) are slow tests.

``TORCHPORT_SCREENSHOT=docs/img/run-page.png`` keeps a screenshot of the run page (README).
"""

from __future__ import annotations

import os
from urllib.parse import quote

import pytest

from tests.conftest import torchport
from tests.interfaces.web.twin import shown

# Each table as the browser renders it: title, header and cell texts (innerText, so what a
# reader sees), notes.
TABLES_JS = """() => Object.fromEntries(Array.from(document.querySelectorAll('section.view'))
  .map(s => [s.dataset.view, {
    title: s.querySelector('h2').innerText,
    columns: Array.from(s.querySelectorAll('thead th')).map(th => th.innerText),
    rows: Array.from(s.querySelectorAll('tbody tr')).map(
      tr => Array.from(tr.children).map(td => td.innerText)),
    notes: Array.from(s.querySelectorAll('ul.notes li')).map(li => li.innerText)}]))"""

# Per chart: points with a value in uPlot's data per series, and canvas pixels drawn in each
# series' colour (the points and lines really on the canvas, not only in the data).
CHARTS_JS = """() => Object.fromEntries(
 Object.entries(window.torchportCharts || {}).map(([id, u]) => {
  const canvas = document.querySelector('#chart-' + id + ' canvas');
  const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const painted = u.series.slice(1).map((s, k) => {
    const hex = s.stroke(u, k + 1);
    const rgb = [1, 3, 5].map(i => parseInt(hex.slice(i, i + 2), 16));
    let n = 0;
    for (let i = 0; i < pixels.length; i += 4)
      if (pixels[i + 3] > 200 && rgb.every((c, j) => Math.abs(pixels[i + j] - c) < 16)) n++;
    return n;
  });
  const points = u.data.slice(1).map(s => s.filter(v => v != null).length);
  return [id, {points, painted}];
}))"""


def _clean(table: dict) -> dict:
    squash = lambda text: " ".join(text.split())  # noqa: E731
    return {
        "title": squash(table["title"]),
        "columns": [squash(c) for c in table["columns"]],
        "rows": [[squash(c) for c in row] for row in table["rows"]],
        "notes": [squash(n) for n in table["notes"]],
    }


def _twin_url(url: str) -> str:
    base, _, query = url.partition("?")
    path_start = base.index("/", len("http://"))
    path = base[path_start:].rstrip("/") or "/runs"
    return base[:path_start] + path + ".json" + (f"?{query}" if query else "")


def check_page(tab, url: str | None = None) -> dict:
    """The page now shown (or ``url``, loaded) equals its JSON twin; returns the twin."""
    page = tab.page
    if url:
        page.goto(url)
    page.wait_for_load_state("load")
    response = page.request.get(_twin_url(page.url))
    assert response.ok, response.text()[:500]
    twin = response.json()
    tables = {name: _clean(t) for name, t in page.evaluate(TABLES_JS).items()}
    assert list(tables) == list(twin["views"]) and tables, page.url
    for name, view in twin["views"].items():
        assert tables[name] == shown(view), (page.url, name)
    assert page.locator("h1").inner_text() == twin["title"]
    check_charts(tab, twin)
    assert tab.errors == [] and tab.outside == [], (tab.errors, tab.outside)
    return twin


def check_charts(tab, twin: dict) -> None:
    """Every chart of the twin is drawn: its points in uPlot and its colours on the canvas."""
    drawn = tab.page.evaluate(CHARTS_JS)
    assert set(drawn) == {c["id"] for c in twin["charts"]}
    for chart in twin["charts"]:
        expected = [sum(v is not None for v in s["values"]) for s in chart["series"]]
        assert drawn[chart["id"]]["points"] == expected and all(expected), chart["id"]
        painted = drawn[chart["id"]]["painted"]
        # Markers shrink series by series, so each shows; lines may lie on each other (a
        # device loss equal to the reference's), so one colour on the canvas is enough there.
        assert all(painted) if chart["kind"] == "points" else any(painted), (chart["id"], drawn)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first to ask builds smoke_kb: two real runs
def test_click_runs_run_case_compare(tab, server, smoke_kb):
    a, b = smoke_kb["a"], smoke_kb["b"]
    page = tab.page
    runs = check_page(tab, server + "/")
    assert [row[0] for row in runs["views"]["runs"]["rows"]] == [b, a]

    page.click(f'section[data-view="runs"] a[href="/runs/{a}"]')
    page.wait_for_url(f"**/runs/{a}")
    run = check_page(tab)
    assert {"matrix", "coverage", "placement", "host_ops", "compile", "perf", "train"} <= set(
        run["views"]
    )
    assert {"coverage", "throughput", "compile"} <= {c["id"] for c in run["charts"]}
    assert any(c["id"].startswith("loss-") for c in run["charts"])
    assert page.locator('section[data-view="matrix"] td.gr-fallback').count() >= 1
    if os.environ.get("TORCHPORT_SCREENSHOT"):
        page.screenshot(path=os.environ["TORCHPORT_SCREENSHOT"], full_page=True)

    page.click('section[data-view="matrix"] a[href="/cases/hf/llama"]')
    page.wait_for_url("**/cases/hf/llama")
    case = check_page(tab)
    assert [row[0] for row in case["views"]["history"]["rows"]] == [a, a, b, b]
    assert case["latest_failure"]["status"] == "accuracy_fail"
    assert "history-step" in {c["id"] for c in case["charts"]}

    page.click(f'a.compare-link[href="/compare?a={a}&b={b}"]')
    page.wait_for_url("**/compare?*")
    compared = check_page(tab)
    failing = compared["views"]["newly-failing"]["rows"]
    assert {(row[0], row[1]) for row in failing} == {("hf/llama", "eager"), ("hf/llama", "compile")}

    page.click('section[data-view="newly-failing"] a[href="/cases/hf/llama"] >> nth=0')
    page.wait_for_url("**/cases/hf/llama")
    assert all(url.startswith(server) for url in tab.requested), tab.requested


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first to ask builds smoke_kb: two real runs
@pytest.mark.parametrize(
    "path",
    [
        "/?device=simdev&label=release%3Db",
        "/runs/{b}",
        "/cases/smoke/mlp",
        "/ops/cumsum",
        "/search?q=llama",
    ],
)
def test_other_pages_equal_their_twins(tab, server, smoke_kb, path):
    twin = check_page(tab, server + path.format(b=quote(smoke_kb["b"])))
    assert twin["views"], path


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first to ask builds smoke_kb: two real runs
def test_op_page_names_the_cases_and_runs(tab, server, smoke_kb):
    twin = check_page(tab, server + "/ops/cumsum")
    assert [row[0] for row in twin["views"]["runs"]["rows"]] == [smoke_kb["a"]]
    assert {row[0] for row in twin["views"]["results"]["rows"]} == {"hf/llama"}


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first to ask builds smoke_kb: two real runs
def test_report_opens_from_disk_and_fetches_nothing(tab, smoke_kb, tmp_path):
    check_report(tab, smoke_kb, tmp_path)


def test_recorded_kb_click_runs_run_case_compare(tab, recorded_server, recorded_kb):
    a, b = recorded_kb["a"], recorded_kb["b"]
    page = tab.page
    runs = check_page(tab, recorded_server + "/")
    assert [row[0] for row in runs["views"]["runs"]["rows"]] == [b, a]

    page.click(f'section[data-view="runs"] a[href="/runs/{a}"]')
    page.wait_for_url(f"**/runs/{a}")
    run = check_page(tab)
    assert {"matrix", "coverage", "placement", "compile", "perf", "train"} <= set(run["views"])
    assert page.locator('section[data-view="matrix"] td.gr-fallback').count() >= 1

    page.click('section[data-view="matrix"] a[href="/cases/smoke/mlp"]')
    page.wait_for_url("**/cases/smoke/mlp")
    case = check_page(tab)
    assert [row[0] for row in case["views"]["history"]["rows"]] == [a, a, b, b]
    assert case["latest_failure"]["status"] == "accuracy_fail"

    page.click(f'a.compare-link[href="/compare?a={a}&b={b}"]')
    page.wait_for_url("**/compare?*")
    compared = check_page(tab)
    failing = compared["views"]["newly-failing"]["rows"]
    assert {(row[0], row[1]) for row in failing} == {
        ("smoke/mlp", "eager"),
        ("smoke/mlp", "compile"),
    }
    assert all(url.startswith(recorded_server) for url in tab.requested), tab.requested


@pytest.mark.parametrize(
    "path", ["/?device=cpu&label=release%3Db", "/runs/r2", "/ops/cumsum", "/search?q=llama"]
)
def test_recorded_kb_pages_equal_their_twins(tab, recorded_server, path):
    twin = check_page(tab, recorded_server + path)
    assert twin["views"], path


def test_recorded_kb_report_opens_from_disk_and_fetches_nothing(tab, recorded_kb, tmp_path):
    check_report(tab, recorded_kb, tmp_path)


def check_report(tab, kb: dict, tmp_path) -> None:
    """``torchport report`` of run b compared with a, opened from disk: both pages, plots drawn,
    nothing fetched."""
    out = torchport(
        "report", kb["b"], "--compare", kb["a"], "-o", tmp_path / "r.html", "--db", kb["db"]
    )
    assert out.returncode == 0, out.stderr
    tab.page.goto((tmp_path / "r.html").as_uri())
    tab.page.wait_for_load_state("load")
    assert tab.page.locator("article.page").count() == 2
    drawn = tab.page.evaluate(CHARTS_JS)
    assert drawn and all(any(d["painted"]) for d in drawn.values()), drawn
    assert tab.outside == [] and tab.errors == []
    assert all(url.startswith(("file://", "data:")) for url in tab.requested), tab.requested
