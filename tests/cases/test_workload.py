"""A team's own workload factory, written outside the repo, runs with --workload."""

import json
import textwrap

import pytest

from tests.conftest import torchport

FACTORY = textwrap.dedent("""
    import torch

    class TinyRegressor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                            torch.nn.Linear(16, 1))

        def forward(self, x):
            return self.body(x)

    def make():
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        return {"model": TinyRegressor(), "inputs": (x,),
                "loss_fn": lambda out: torch.nn.functional.mse_loss(out, y.to(out.device)),
                "tolerance": (1e-4, 1e-4)}
""")


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_user_workload_runs_both_modes(tmp_path):
    pkg = tmp_path / "team_models"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "regressor.py").write_text(FACTORY)
    proc = torchport(
        "run",
        "--workload",
        "team_models.regressor:make",
        "--device",
        "cpu",
        "--probes",
        "none",
        "--db",
        tmp_path / "kb.db",
        "--json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)["results"]
    assert [(r["case"], r["mode"], r["status"]) for r in results] == [
        ("workload/team_models.regressor:make", "eager", "pass"),
        ("workload/team_models.regressor:make", "compile", "pass"),
    ]
    # loss and gradients went through parity too
    assert results[0]["metrics"]["parity_tensors"] == 1 + 1 + 4


def test_factory_that_raises_is_bad_input(tmp_path):
    (tmp_path / "broken.py").write_text("def make():\n    raise RuntimeError('no data')\n")
    proc = torchport("run", "--workload", "broken:make", "--db", tmp_path / "kb.db", cwd=tmp_path)
    assert proc.returncode == 2 and "factory raised RuntimeError: no data" in proc.stderr
