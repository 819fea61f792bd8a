"""An evaluation's scorecard page in Chromium at 1400 and 700 px, over an evaluation written
through the store (fast: no real run): one row per question with its colour and links to the
runs behind it, nothing wider than the window, and the JSON twin saying the same.
``TORCHPORT_SCREENSHOTS=DIR`` keeps a screenshot of each width there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request

import pytest

from tests import kb
from tests.conftest import TORCHPORT
from torchport.kb import open_store
from torchport.views.evaluation import PLAN_AUTHOR, Plan, PlannedPart

LABELS = {"evaluation": "ev-x", "evaluation_part": "smoke"}
TONE_COLOUR = {"good": "rgb(217, 242, 220)", "bad": "rgb(249, 215, 213)"}


@pytest.fixture(scope="module")
def evaluation_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("scorecard") / "kb.db"
    kb.build(path, run_id="ev-dev", device="simdev", labels=LABELS | {"evaluation_side": "device"})
    kb.build(path, run_id="ev-ref", labels=LABELS | {"evaluation_side": "reference"})
    plan = Plan("ev-x", "simdev", "cpu", 1200, [])
    plan.parts = [
        PlannedPart("smoke", side, device, "q", {"suite": "smoke"}, ["smoke/mlp", "hf/llama"],
                    ["eager", "compile"], 100.0, 0)
        for side, device in (("device", "simdev"), ("reference", "cpu"))
    ]  # fmt: skip
    plan.left_out = [{"part": "dist", "side": "device", "why": "out of time: needs ~110 s"}]
    with open_store(str(path), write=True) as store:
        store.add_note("ev-dev", plan.note_text(), author=PLAN_AUTHOR)
        store.add_note("ev-dev", "accepted: the simulator copies on purpose", author="lead")
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


def test_the_scorecard_reads_at_1400_and_700_px(tab, evaluation_server):
    with urllib.request.urlopen(evaluation_server + "/evaluations/ev-x.json") as reply:
        twin = json.load(reply)
    answers = twin["scorecard"]["answers"]
    assert len(answers) >= 10 and twin["page"] == "evaluation"
    for width in (1400, 700):
        tab.page.set_viewport_size({"width": width, "height": 1000})
        tab.page.goto(evaluation_server + "/evaluations/ev-x")
        tab.page.wait_for_load_state("load")
        rows = tab.page.locator("li.question")
        assert rows.count() == len(answers)
        shown = [rows.nth(i).locator(".q").inner_text() for i in range(rows.count())]
        assert shown == [a["question"] for a in answers]
        for i, a in enumerate(answers):
            assert rows.nth(i).get_attribute("data-tone") == a["tone"]
            if a["tone"] in TONE_COLOUR:
                colour = (
                    rows.nth(i)
                    .locator(".badge")
                    .evaluate("el => getComputedStyle(el).backgroundColor")
                )
                assert colour == TONE_COLOUR[a["tone"]]
        links = tab.page.locator("li.question .evidence a")
        assert links.count() > 0
        assert all(
            re.fullmatch(r"/runs/ev-(dev|ref)#view-[a-z_]+", links.nth(i).get_attribute("href"))
            for i in range(links.count())
        )
        card = tab.page.locator("#view-scorecard")
        # nothing in the scorecard is wider than the window: no sideways scrolling to read it
        assert card.evaluate("el => el.scrollWidth <= el.clientWidth"), width
        assert tab.page.evaluate("document.documentElement.scrollWidth") <= width
        text = tab.page.locator("main").inner_text()
        assert "out of time: needs ~110 s" in text  # what was not evaluated, and why
        assert "accepted: the simulator copies on purpose" in text  # a decision
        folder = os.environ.get("TORCHPORT_SCREENSHOTS")
        if folder:
            tab.page.screenshot(path=os.path.join(folder, f"scorecard-{width}.png"), full_page=True)
    tab.page.locator("li.question .evidence a").first.click()
    tab.page.wait_for_load_state("load")
    assert "/runs/ev-" in tab.page.url
    assert tab.errors == [] and tab.outside == []


def test_an_unknown_evaluation_is_a_404_with_the_reason(evaluation_server):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(evaluation_server + "/evaluations/ev-nope.json")
    assert err.value.code == 404
    assert "no evaluation 'ev-nope'" in json.load(err.value)["error"]


def test_the_evaluations_index_links_each_scorecard(evaluation_server):
    with urllib.request.urlopen(evaluation_server + "/evaluations.json") as reply:
        page = json.load(reply)
    rows = page["views"]["evaluations"]["rows"]
    assert rows == [["ev-x", "simdev", "cpu", rows[0][3], 2]]
    with urllib.request.urlopen(evaluation_server + "/evaluations") as reply:
        assert 'href="/evaluations/ev-x"' in reply.read().decode()
