"""Knowledge bases and a real browser for the web tests.

``smoke_kb``: two real runs of the smoke suite on simdev (the reference device, so placement
finds host ops), one with every probe, one with a planted wrong kernel (newly failing cases to
compare): about two and a half minutes on 2 cores, so the tests on it are slow ones.
``recorded_kb``: two runs written through the store (tests/kb.py, shapes as the probes write
them), one with a newly failing case: what the default run's browser tests read. ``browser``:
Debian's Chromium driven by Playwright, one per session; a missing browser fails the tests (it
is installed by .ci/run), never skips them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests import kb
from tests.conftest import TORCHPORT, torchport

# As root Chromium needs --no-sandbox; the networking switches keep it from calling home on
# this closed network (docs/install.md).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SMOKE = ["--suite", "smoke", "--cases", "mlp,llama", "--device", "simdev"]


def _run(db, *args, env=None) -> str:
    proc = torchport("run", *SMOKE, *args, "--db", db, "--json", env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)["run_id"]


@pytest.fixture(scope="session")
def smoke_kb(tmp_path_factory) -> dict:
    db = tmp_path_factory.mktemp("webkb") / "kb.db"
    rich = _run(
        db,
        "--probes",
        "placement,perf,compile,train,profile",
        "--profile",
        "--train-steps",
        "2",
        "--perf-budget",
        "0.1",
        "--label",
        "release=a",
    )
    # rsqrt (llama's RMSNorm) made wrong: llama fails parity in run b, mlp still passes.
    planted = _run(
        db,
        "--probes",
        "none",
        "--label",
        "release=b",
        env={"TORCHPORT_SIMDEV_WRONG_OPS": "rsqrt"},
    )
    return {"db": str(db), "a": rich, "b": planted}


@pytest.fixture(scope="session")
def recorded_kb(tmp_path_factory) -> dict:
    db = kb.build(tmp_path_factory.mktemp("webkb-recorded") / "kb.db", labels={"release": "a"})
    wrong = {"type": "AccuracyError", "message": "outside tolerance: logits"}
    failing = [
        dict(r, status="accuracy_fail", stage="parity", error=wrong)
        if r["case"] == "smoke/mlp"  # passes in r1: newly failing in r2
        else r
        for r in kb.results()
    ]
    kb.build(db, run_id="r2", labels={"release": "b"}, results_=failing)
    return {"db": db, "a": "r1", "b": "r2"}


@pytest.fixture(scope="session")
def server(smoke_kb):
    """``torchport serve`` as a user starts it, on a free port; yields its URL."""
    yield from _serve(smoke_kb["db"])


@pytest.fixture(scope="session")
def recorded_server(recorded_kb):
    yield from _serve(recorded_kb["db"])


def _serve(db):
    proc = subprocess.Popen(
        [TORCHPORT, "serve", "--db", db, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+", line)
    if not found:
        proc.kill()
        pytest.fail(f"torchport serve did not start: {line!r} {proc.stderr.read()[-2000:]}")
    yield found.group(0)
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="session")
def browser():
    path = shutil.which("chromium")
    assert path, (
        "chromium is not installed: apt-get install -y chromium (the browser tests drive "
        "Debian's Chromium; .ci/run installs it)"
    )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class Tab:
    """A browser page with what it asked for: every URL, the ones aborted for leaving this
    machine, and script errors."""

    page: Any
    requested: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


LOCAL = re.compile(r"^(https?|wss?)://(127\.0\.0\.1|localhost)(:\d+)?/|^(file|data):")


@pytest.fixture
def tab(browser):
    """A fresh page; any request that would leave this machine is aborted and recorded."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = Tab(page=None)

    def route(r):
        url = r.request.url
        tab.requested.append(url)
        if LOCAL.match(url):
            r.continue_()
        else:
            tab.outside.append(url)
            r.abort()

    context.route("**/*", route)
    tab.page = context.new_page()
    tab.page.on("pageerror", lambda exc: tab.errors.append(str(exc)))
    yield tab
    context.close()
