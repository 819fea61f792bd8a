"""Shared fixtures: run the real ``torchport`` command in a subprocess against a tmp database."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# One reference cache for the test session (shared by in-process ladders and CLI runs, as it
# is shared across runs on a user's host), never the user's own ~/.cache.
os.environ.setdefault("TORCHPORT_REFERENCE_CACHE", tempfile.mkdtemp(prefix="torchport-refs-"))
os.environ.setdefault("TORCHPORT_CACHE", tempfile.mkdtemp(prefix="torchport-cache-"))
# The installed console script, as a user runs it (not ``python -m``): the venv's bin/ first.
TORCHPORT = str(Path(sys.executable).parent / "torchport")
if not os.path.exists(TORCHPORT):  # pragma: no cover - an install without scripts
    TORCHPORT = shutil.which("torchport") or TORCHPORT


def torchport(*args, cwd=None, timeout=600, env=None) -> subprocess.CompletedProcess:
    """Run the installed ``torchport`` script, from ``cwd`` or a new folder outside the repo."""
    full_env = dict(os.environ, **(env or {}))
    if cwd is None:
        cwd = tempfile.mkdtemp(prefix="torchport-cli-")
    return subprocess.run(
        [TORCHPORT, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=full_env,
    )


@pytest.fixture(scope="session")
def pg_server():
    """A superuser URL of the session's PostgreSQL server (tests/pg.py); the test fails when
    none can be started."""
    from tests import pg

    given = pg.server_from_env()
    if given:
        yield given
        return
    url, folder = pg.start_server()
    try:
        yield url
    finally:
        pg.stop_server(folder)


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server, dropped after the test."""
    from tests import pg

    url, name = pg.create_database(pg_server)
    yield url
    pg.drop_database(pg_server, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def kb_url(request, tmp_path) -> str:
    """A knowledge base that does not exist yet, on each engine: an SQLite path, or an empty
    PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "kb.db")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "kb.db"


@pytest.fixture
def run_json(db, tmp_path):
    """Run ``torchport run ... --json`` and return the parsed output (asserting exit 0)."""

    def _run(*args, expect=0):
        proc = torchport("run", *args, "--db", db, "--json", cwd=tmp_path)
        assert proc.returncode == expect, proc.stderr[-3000:]
        return json.loads(proc.stdout) if expect == 0 else proc

    return _run


# Under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`) a module's tests stay on one
# worker, so a module-scoped fixture (one real run that many tests read) is built once; modules
# that read the same session-scoped fixture share a group for the same reason.
SHARED_GROUPS = {
    "tests/runner/test_faults.py": "planted",  # planted_runs (tests/runner/conftest.py)
    "tests/runner/test_hardening.py": "planted",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith("tests/interfaces/web/"):
            group = "web"  # smoke_kb, recorded_kb, servers and one Chromium
        else:
            group = SHARED_GROUPS.get(path, path)
        item.add_marker(pytest.mark.xdist_group(group))
