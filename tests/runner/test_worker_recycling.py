"""Workers do not outlive their resources: a worker reports what it holds after each task
(memory maps, resident set) and the executor replaces it before the next task once it is past
a watermark, saying so in the result (runner/executors/local.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import torchport
from torchport.runner.executors import local
from torchport.runner.executors.worker import resources

LIMITS = {"maps": 1000, "rss_bytes": 10**9}


def test_under_the_watermarks_a_worker_is_kept():
    assert local.over_watermark({"maps": 999, "rss_bytes": 10**9 - 1}, LIMITS) is None


def test_past_the_maps_watermark_it_is_replaced_and_says_why():
    why = local.over_watermark({"maps": 61_440, "rss_bytes": 1}, LIMITS)
    assert why is not None
    assert why.startswith("the worker held 61,440 memory maps after this task (watermark 1,000)")


def test_past_the_rss_watermark_it_is_replaced():
    assert "bytes resident" in (local.over_watermark({"rss_bytes": 2 * 10**9}, LIMITS) or "")


@given(st.dictionaries(st.text(max_size=12), st.none() | st.integers() | st.text(max_size=5)))
def test_any_report_is_judged_without_raising(report):
    why = local.over_watermark(report, LIMITS)
    assert why is None or why.startswith("the worker held")


def test_the_default_maps_watermark_is_a_quarter_of_the_kernel_limit(monkeypatch):
    monkeypatch.delenv(local.MAPS_ENV, raising=False)
    monkeypatch.setattr(local, "_max_map_count", lambda: 65530)
    assert local.watermarks()["maps"] == 16382


def test_a_worker_reads_its_own_maps_and_resident_set():
    held = resources()
    assert held["maps"] > 10 and held["rss_bytes"] > 10**6


@pytest.mark.slow  # three worker starts
def test_recycled_between_tasks_and_recorded(tmp_path):
    db = tmp_path / "kb.db"
    args = ["run", "--suite", "synthetic", "--cases", "synthetic/noop_00[0-2]", "--modes"]
    args += ["eager", "--device", "cpu", "--probes", "none", "--db", db, "--json"]
    proc = torchport(*args, cwd=tmp_path, env={local.MAPS_ENV: "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = json.loads(proc.stdout)["run_id"]
    shown = json.loads(torchport("show", run_id, "--db", db, "--json").stdout)
    findings = [r["findings"] for r in shown["results"]]
    assert len(findings) == 3
    assert all(f["worker_recycled"].startswith("the worker held") for f in findings)
    pids = {f["worker_resources"]["pid"] for f in findings}
    assert len(pids) == 3  # a fresh worker for every task
