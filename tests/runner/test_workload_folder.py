"""One way for every child to find the workload's folder: the supervisor sets it once, the one
bootstrap of every child (execution/child.py) puts it on sys.path; a workload run from its own
folder, with no PYTHONPATH, gets through the worker, the reference and the compile children."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import torchport
from torchport.execution import child
from torchport.runner import plan

WORKLOAD = textwrap.dedent("""\
    import torch


    def make():
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        return {"model": model, "inputs": (x,),
                "loss_fn": lambda out: torch.nn.functional.mse_loss(out, y.to(out.device))}
""")


def test_one_name_for_the_folder_everywhere():
    from torchport.execution import reference_child

    assert plan.WORKLOAD_PATH_ENV == child.WORKLOAD_PATH_ENV == reference_child.WORKLOAD_PATH_ENV


def test_the_bootstrap_puts_the_folder_after_the_standard_library(tmp_path):
    """The folder's module runs as a child module would, found only through the variable."""
    (tmp_path / "team_probe.py").write_text("import sys\nprint('found', sys.path[-1])\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    without = subprocess.run(
        [sys.executable, "-c", child._BOOTSTRAP, "team_probe"],
        env=env,
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert without.returncode != 0 and "No module named team_probe" in without.stderr
    env[child.WORKLOAD_PATH_ENV] = str(tmp_path)
    ran = subprocess.run(
        [sys.executable, "-c", child._BOOTSTRAP, "team_probe"],
        env=env,
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["found", str(tmp_path)]


@pytest.mark.slow  # cold and warm compiles on 2 shared cores
def test_workload_from_its_own_folder_proves_its_warm_compile(tmp_path):
    (tmp_path / "regressor.py").write_text(WORKLOAD)
    env = {"PYTHONPATH": ""}
    proc = torchport(
        "run",
        "--workload",
        "regressor:make",
        "--device",
        "cpu",
        "--modes",
        "compile",
        "--probes",
        "compile",
        "--db",
        tmp_path / "kb.db",
        "--json",
        cwd=tmp_path,
        env=env,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = json.loads(proc.stdout)["results"]
    assert result["status"] == "pass", result.get("error")
    compiled = result["findings"]["compile"]
    assert compiled.get("warm_proven") is True, {
        k: compiled.get(k) for k in ("warm_proven", "warm_check", "warm")
    }
