"""The dashboard's page of a matrix (``/matrix/NAME``): the release note line of each
environment against the baseline, links to every list, the comparison's tables, a JSON twin;
stored names stay text."""

from __future__ import annotations

import html

import pytest
from starlette.testclient import TestClient

from tests import kb
from torchport.interfaces.web.app import create_app
from torchport.kb import open_store

LOCAL = "http://localhost"
HOSTILE = "<b>new</b>"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = tmp_path_factory.mktemp("matrix") / "kb.db"
    labels = {"matrix": "demo", "matrix_baseline": "old"}
    kb.build(path, run_id="r1", labels={**labels, "matrix_env": "old"})
    broken = kb.results()
    broken[0] = dict(broken[0], status="eager_fail", stage="eager", error={"type": "E"})
    kb.build(path, run_id="r2", labels={**labels, "matrix_env": HOSTILE}, results_=broken)
    kb.build(path, run_id="r3", labels={"matrix": "other", "matrix_env": "x"})
    with open_store(path, write=False) as store:
        yield TestClient(create_app(store), base_url=LOCAL)


def test_matrix_page_shows_the_note_and_links_every_list(client):
    page = client.get("/matrix/demo")
    assert page.status_code == 200
    text = page.text
    headline = f"old -&gt; {html.escape(HOSTILE)} on cpu, suite smoke: 1 newly failing, 0 fixed"
    assert headline in text and HOSTILE not in text
    assert 'href="/compare?a=r1&amp;b=r2&amp;list=newly_failing"' in text
    data = client.get("/matrix/demo", headers={"accept": "application/json"}).json()
    [pair] = data["pairs"]
    assert pair["baseline"] == "old" and pair["other"] == HOSTILE
    assert {"list": "newly_failing", "rows": 1} == {
        k: v for k, v in pair["lists"][0].items() if k != "href"
    }
    assert data["views"]["release-note"]["rows"][0][:4] == ["old", HOSTILE, "r1", "r2"]


def test_unknown_matrix_is_404(client):
    page = client.get("/matrix/nothing", headers={"accept": "application/json"})
    assert page.status_code == 404 and "no runs of a matrix 'nothing'" in page.json()["error"]


def test_each_named_run_is_compared_with_the_baselines_run_of_that_name(tmp_path):
    """Environments with several runs ([[env.runs]]): each run the baseline made is compared
    with the other environments' run of the same name; a run only another environment made
    is not paired."""
    path = tmp_path / "kb.db"
    labels = {"matrix": "multi", "matrix_baseline": "cpu"}
    broken = kb.results()
    broken[0] = dict(broken[0], status="eager_fail", stage="eager", error={"type": "E"})
    for run_id, env, run, results in (
        ("c1", "cpu", "smoke", None),
        ("c2", "cpu", "xglm", None),
        ("x1", "xla", "smoke", broken),
        ("x2", "xla", "forward", None),
    ):
        kb.build(
            path,
            run_id=run_id,
            labels={**labels, "matrix_env": env, "matrix_run": run},
            results_=results,
        )
    with open_store(path, write=False) as store:
        client = TestClient(create_app(store), base_url=LOCAL)
        data = client.get("/matrix/multi", headers={"accept": "application/json"}).json()
    [pair] = data["pairs"]
    assert (pair["baseline"], pair["other"], pair["run_name"]) == ("cpu", "xla", "smoke")
    assert pair["headline"].startswith("cpu -> xla, run smoke, on cpu, suite smoke: 1 newly")
    assert data["views"]["release-note"]["rows"][0][:4] == ["cpu", "xla", "c1", "x1"]
