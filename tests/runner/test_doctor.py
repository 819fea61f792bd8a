"""doctor diagnoses in a child: a backend that breaks ``import torch`` is one line, exit 2."""

from __future__ import annotations

import os

from tests.conftest import torchport

BROKEN = """
def autoload():
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")
"""


def test_doctor_names_a_backend_whose_autoload_breaks_import_torch(tmp_path):
    site = tmp_path / "site"
    dist = site / "fake_npu-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-npu\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[torch.backends]\nfake_npu = fake_npu:autoload\n")
    (site / "fake_npu.py").write_text(BROKEN)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    out = torchport("doctor", env=env, timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "fake_npu" in lines[0] and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in lines[0]
    assert "cause: ImportError: libhccl.so: cannot open shared object file" in lines[0]


def test_doctor_lists_devices(tmp_path):
    out = torchport("doctor", "--json")
    assert out.returncode == 0, out.stderr
    assert '"device": "cpu"' in out.stdout


def test_doctor_says_which_api_each_figure_uses(monkeypatch):
    """A backend reached only through torch.accelerator (accdev): doctor names the standard
    API for synchronise, device count and peak memory, and why timing uses the host clock."""
    from torchport.runner.doctor import diagnose

    monkeypatch.setenv("TORCHPORT_PRIVATEUSE1_MODULE", "torchport.devices.accdev")
    rows = {r["device"]: r for r in diagnose()["devices"]}
    api = rows["accdev"]["api"]
    assert api["synchronize"] == "torch.accelerator.synchronize()"
    assert api["device_count"] == "torch.accelerator.device_count()"
    assert api["peak_memory"] == "torch.accelerator.memory.max_memory_allocated()"
    assert api["timing"].startswith("host clock (no timing events:")
    assert "api" not in rows["cpu"]
