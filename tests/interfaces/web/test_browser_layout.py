"""Layout a reader trusts, in Chromium over a knowledge base written through the store API
(fast: no real run): table headers and short words are never split across lines, a run's
headline shows as coloured badges, and a case run on two devices is plotted as one line per
device with run dates on x and a legend naming each."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests import kb
from tests.conftest import TORCHPORT

# Cells of short single words (status, on_device, a header) and how many lines each takes.
SPLIT_WORDS_JS = """() => Array.from(document.querySelectorAll('th, td'))
  .filter(el => /^[A-Za-z_]{3,20}$/.test(el.innerText.trim()))
  .map(el => {
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const tops = new Set();
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      if (!node.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
    }
    return [el.innerText.trim(), tops.size];
  })
  .filter(([, lines]) => lines > 1)"""


@pytest.fixture(scope="module")
def layout_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("layout") / "kb.db"
    kb.build(path, run_id="cpu-1", environment={"torch": "2.13.0", "device_name": "cpu"})
    kb.build(
        path,
        run_id="simdev-1",
        device="simdev",
        environment={"torch": "2.13.0", "device_name": "simdev"},
    )
    proc = subprocess.Popen(
        [TORCHPORT, "serve", "--db", str(path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    found = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
    if not found:
        proc.kill()
        pytest.fail(f"torchport serve did not start: {proc.stderr.read()[-2000:]}")
    yield found.group(0)
    proc.terminate()
    proc.wait(timeout=30)


def test_narrow_columns_never_split_a_word(tab, layout_server):
    for width in (1400, 700):  # a laptop window and half of one
        tab.page.set_viewport_size({"width": width, "height": 900})
        tab.page.goto(layout_server + "/runs/simdev-1")
        tab.page.wait_for_load_state("load")
        assert tab.page.locator('section[data-view="placement"] td').count() > 0
        assert tab.page.evaluate(SPLIT_WORDS_JS) == [], width
    assert tab.errors == []


def test_headline_badges_are_coloured_by_tone(tab, layout_server):
    tab.page.goto(layout_server + "/")
    tab.page.wait_for_load_state("load")
    row = 'tr:has(a[href="/runs/simdev-1"]) '
    colours = {
        name: tab.page.locator(row + f'span.badge[data-badge="{name}"]').evaluate(
            "el => getComputedStyle(el).backgroundColor"
        )
        for name in ("passed", "accuracy", "fallback", "speedup")
    }
    assert colours["accuracy"] == "rgb(249, 215, 213)"  # bad: --fail
    assert colours["fallback"] == "rgb(251, 233, 200)"  # warn: --warn
    assert len(set(colours.values())) == 2  # passed and speedup are warnings too here
    assert tab.errors == []


def test_case_history_plots_a_line_per_device_with_dates(tab, layout_server):
    tab.page.goto(layout_server + "/cases/smoke/mlp")
    tab.page.wait_for_load_state("load")
    twin = tab.page.request.get(layout_server + "/cases/smoke/mlp.json").json()
    step = next(c for c in twin["charts"] if c["id"] == "history-step")
    assert [s["label"] for s in step["series"]] == [
        "cpu [eager]",
        "cpu [compile]",
        "simdev [eager]",
        "simdev [compile]",
    ]
    assert [s["values"] for s in step["series"]] == [
        [2.71, None],
        [46.8, None],
        [None, 2.71],
        [None, 46.8],
    ]
    assert all(re.fullmatch(r"\d\d-\d\d \d\d:\d\d", x) for x in step["x"])
    legend = tab.page.locator('[data-chart="history-step"] .u-legend .u-label').all_inner_texts()
    assert legend == ["run start, UTC (oldest first)", *(s["label"] for s in step["series"])]
    # x tick labels do not overlap: each label's box ends before the next begins
    boxes = tab.page.evaluate(
        """() => { const u = window.torchportCharts['history-step'];
        return u.axes[0]._values ? u.axes[0]._values.length : null; }"""
    )
    assert boxes is None or boxes <= len(step["x"])
    assert tab.errors == []
