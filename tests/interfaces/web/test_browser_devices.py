"""A CPU run and a simdev run of the smoke cases in one knowledge base, read in a real browser
(issue 31's acceptance): the run list shows the simdev run's host fallbacks, compare names
them against a CPU side with no placement data, ``search cumsum`` finds them, and a case's
history plots one line per device with run dates on x.

The simdev runs are the web tests' own (``smoke_kb``); a real CPU run of the same cases is
added to a copy of that file. ``TORCHPORT_SCREENSHOTS=docs/img`` keeps screenshots of each
page (docs/dashboard.md shows them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from urllib.parse import quote

import pytest

from tests.conftest import TORCHPORT, torchport
from tests.interfaces.web.test_browser import check_page

# a real CPU run of two cases on top of the simdev runs (smoke_kb: two real runs)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def devices_kb(smoke_kb, tmp_path_factory) -> dict:
    db = tmp_path_factory.mktemp("devices") / "kb.db"
    shutil.copy(smoke_kb["db"], db)
    proc = torchport(
        "run",
        "--suite",
        "smoke",
        "--cases",
        "mlp,llama",
        "--device",
        "cpu",
        "--probes",
        "perf,compile",
        "--perf-budget",
        "0.1",
        "--label",
        "backend=cpu",
        "--db",
        db,
        "--json",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"db": str(db), "cpu": json.loads(proc.stdout)["run_id"], "simdev": smoke_kb["a"]}


@pytest.fixture(scope="module")
def devices_server(devices_kb):
    proc = subprocess.Popen(
        [TORCHPORT, "serve", "--db", devices_kb["db"], "--port", "0"],
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


def _shot(tab, name: str) -> None:
    folder = os.environ.get("TORCHPORT_SCREENSHOTS")
    if folder:
        tab.page.screenshot(path=os.path.join(folder, name), full_page=True)


def test_run_list_shows_the_simdev_runs_fallbacks(tab, devices_server, devices_kb):
    runs = check_page(tab, devices_server + "/")
    heads = {row[0]: row[-1] for row in runs["views"]["runs"]["rows"]}
    simdev, cpu = heads[devices_kb["simdev"]], heads[devices_kb["cpu"]]
    assert simdev["host_results"] > 0 and "aten.cumsum.default" in simdev["host_ops"]
    assert simdev["badges"]["fallback"]["tone"] == "warn"
    assert cpu["host_results"] == 0 and cpu["badges"]["fallback"] == {
        "text": "placement not graded",
        "tone": "none",
    }
    badge = tab.page.locator(
        f'tr:has(a[href="/runs/{devices_kb["simdev"]}"]) span.badge[data-badge="fallback"]'
    )
    assert badge.inner_text() == simdev["badges"]["fallback"]["text"]
    assert re.match(r"\d+ host fallback \(\d+ ops", badge.inner_text())
    _shot(tab, "runs-headline.png")


def test_compare_cpu_to_simdev_names_the_host_ops(tab, devices_server, devices_kb):
    cpu, simdev = devices_kb["cpu"], devices_kb["simdev"]
    twin = check_page(tab, devices_server + f"/compare?a={quote(cpu)}&b={quote(simdev)}")
    placement = twin["views"]["placement-host-ops-by-run"]
    ops = {row[0]: row for row in placement["rows"]}
    assert ops["aten.cumsum.default"][2] == "all on the host"
    assert ops["aten.cumsum.default"][4] == "on the host in both"
    assert any("has no placement data" in n for n in placement["notes"])
    _shot(tab, "compare-placement.png")
    cli = torchport("compare", cpu, simdev, "--json", "--db", devices_kb["db"])
    summary = json.loads(cli.stdout)["placement_summary"]
    assert summary["basis"] == "a: all on the host"
    assert "aten.cumsum.default" in summary["still_on_host"]


def test_search_cumsum_finds_the_fallbacks(tab, devices_server, devices_kb):
    twin = check_page(tab, devices_server + "/search?q=cumsum")
    runs = twin["views"]["host_op_runs"]["rows"]
    assert [row[0] for row in runs] == [devices_kb["simdev"]]
    assert {row[0] for row in twin["views"]["host_op_results"]["rows"]} == {"hf/llama"}
    _shot(tab, "search-host-op.png")
    cli = json.loads(torchport("search", "cumsum", "--json", "--db", devices_kb["db"]).stdout)
    assert [row[0] for row in cli["host_op_runs"]["rows"]] == [devices_kb["simdev"]]


def test_case_history_draws_one_line_per_device(tab, devices_server, devices_kb):
    twin = check_page(tab, devices_server + "/cases/smoke/mlp")
    step = next(c for c in twin["charts"] if c["id"] == "history-step")
    labels = [s["label"] for s in step["series"]]
    assert {"cpu [eager]", "simdev [eager]"} <= set(labels), labels
    assert all(re.fullmatch(r"\d\d-\d\d \d\d:\d\d", x) for x in step["x"]), step["x"]
    legend = tab.page.locator('[data-chart="history-step"] .u-legend .u-label').all_inner_texts()
    assert {"cpu [eager]", "simdev [eager]"} <= set(legend), legend
    _shot(tab, "case-history.png")
