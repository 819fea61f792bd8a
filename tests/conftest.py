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
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

# No property test fails on how fast this machine happens to be (issue 44): under load (2 cores
# shared, `make test -n 2` beside other work) Hypothesis' "input generation is slow" health
# check and its per-example deadline fail tests that hold (tests/views/test_baseline.py's did,
# "only 4 valid inputs after 1.01 seconds"). A test that names its own settings keeps them.
hypothesis_settings.register_profile(
    "torchport", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("torchport")

REPO = Path(__file__).resolve().parents[1]
# One reference cache for the test session (shared by in-process ladders and CLI runs, as it
# is shared across runs on a user's host), never the user's own ~/.cache.
os.environ.setdefault("TORCHPORT_REFERENCE_CACHE", tempfile.mkdtemp(prefix="torchport-refs-"))
os.environ.setdefault("TORCHPORT_CACHE", tempfile.mkdtemp(prefix="torchport-cache-"))
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers compiling the same graph into one Inductor cache at once load each other's
    # half-written kernels ("main.so: file too short", seen under `-n 2`): one cache each.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchport-inductor-")
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


# pytest-xdist (`make test` runs `-n 2`): a module's tests run on one worker, so a module-scoped
# fixture (one real run that many tests read) is built once; modules that read the same
# session-scoped fixture go together; the modules that take longest are handed out first, so
# that no worker is left with a long one at the end while the other idles.
XDIST_GROUPS = {
    "tests/runner/test_faults.py": "planted",  # planted_runs (tests/runner/conftest.py)
    "tests/runner/test_hardening.py": "planted",
}
# From the --durations reports of whole runs (a module absent here goes after these, in
# xdist's order: most tests first).
XDIST_LONGEST_FIRST = (
    "planted",
    "tests/interfaces/test_cli.py",
    "tests/runner/test_parallel.py",
    "tests/cases/test_hf_ladder.py",
    "tests/runner/test_ray.py",
    "tests/runner/test_resume.py",
    "web",
    "tests/interfaces/test_ops_cli.py",
    "tests/interfaces/test_generate_cli.py",
    "tests/probes/test_perf.py",
    "tests/interfaces/test_pg_cli.py",
    "tests/probes/test_compile.py",
    "tests/views/test_compare.py",
    "tests/devices/test_simdev.py",
    "tests/probes/test_placement.py",
    "tests/probes/test_flex_probe.py",
)


def xdist_group(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/interfaces/web/"):
        return "web"  # smoke_kb, recorded_kb, their servers and one Chromium
    return XDIST_GROUPS.get(path, path)


@pytest.hookimpl(optionalhook=True)  # a hook of xdist: pytest without it runs the suite serially
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        """xdist's loadscope with a module (or a group above) as the scope, longest first.
        (xdist's own ``--dist loadgroup`` marks do not reach pytest 9's node ids.)"""

        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is complete before the first unit goes out
                self.ordered = True
                rank = {group: i for i, group in enumerate(XDIST_LONGEST_FIRST)}
                units = sorted(self.workqueue.items(), key=lambda u: rank.get(u[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return ByModule(config, log)
