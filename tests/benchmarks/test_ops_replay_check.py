"""benchmarks/ops_replay_check.py driven as a script (tests do not import benchmarks/): every
fallback/host grade of a simdev ops run replayed against simdev's own fallback counter; a run
on another device refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "ops_replay_check.py"
TORCHPORT = Path(sys.executable).parent / "torchport"


def run(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_")}
    return subprocess.run(
        [*argv], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )


@pytest.mark.slow
def test_grades_are_replayed_against_simdevs_counter_and_a_cpu_run_is_refused(tmp_path):
    db = str(tmp_path / "ops.db")
    cases = "ops/cumsum/float32,ops/masked.prod/float32,ops/add/float32"
    made = run(
        str(TORCHPORT), "run", "--suite", "ops", "--device", "simdev", "--cases", cases, "--db", db
    )
    assert made.returncode in (0, 1), made.stderr[-2000:]
    got = run(sys.executable, str(SCRIPT), "--db", db, "--out", str(tmp_path / "r.txt"))
    assert got.returncode == 0, got.stderr[-2000:]
    report = (tmp_path / "r.txt").read_text()
    # cumsum falls back (backed); masked.prod's recorder-only cumprod is no grade; add is native
    assert "grades checked: 1 (fallback 1, host 0)" in report
    assert "backed by simdev's fallback counter: 1" in report
    assert "FALSE (no fallback call in the replay): 0" in report
    cpu_db = str(tmp_path / "cpu.db")
    run(
        str(TORCHPORT),
        "run",
        "--suite",
        "ops",
        "--device",
        "cpu",
        "--cases",
        "ops/add/float32",
        "--db",
        cpu_db,
    )
    refused = run(sys.executable, str(SCRIPT), "--db", cpu_db)
    assert refused.returncode != 0 and "not a simdev run" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
