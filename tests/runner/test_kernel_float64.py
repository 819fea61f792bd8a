"""Float64 probed, not assumed: a device that refuses float64, or computes it silently in
float32, holds the kernel ladder to it. The correct kernel passes on such a device, with the
check that ran instead of the device's float64 gradcheck named; nothing is ``accuracy_fail``
because a check could not run.

simdev is a PrivateUse1 backend, named once per process: each mode runs in a child of its own
(``TORCHPORT_SIMDEV_FLOAT64``, devices/simdev_backend.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json
from torchport.config import RunConfig
from torchport.devices import get_adapter
from torchport.runner.kernels.ladder import KernelLadder
from tests.runner.test_kernel_ladder import tiny_case

adapter = get_adapter("simdev")
adapter.prepare()
probe = adapter.float64_support()
config = RunConfig(suite="kernels", device="simdev", modes=("eager",), perf_budget_s=0.1)
result = KernelLadder(tiny_case("rms_norm"), "eager", config, adapter, lambda e: None, {}).run()
print(json.dumps({"probe": probe, "result": result}))
"""


def run_mode(mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_SIMDEV_")}
    env["TORCHPORT_SIMDEV_FLOAT64"] = mode
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(900)  # a child on a loaded host: about 70 s each
@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("refuse", "float64 refused: add raised"),
        # the same ladder; the probe's downcast answer is also tested in tests/devices
        pytest.param("float32", "silent downcast", marks=pytest.mark.slow),
    ],
)
def test_a_device_without_float64_passes_the_correct_kernel_naming_the_check_that_ran(mode, said):
    got = run_mode(mode)
    supported, why = got["probe"]
    assert not supported and said in why, why
    r, k = got["result"], got["result"]["findings"]["kernel"]
    assert r["status"] == "pass", r["error"]
    assert k["device_float64"] == {"supported": False, "detail": why}
    # float64 gradcheck on the CPU (the op's CPU implementation); on the device, the check
    # that stood in for it, named with why
    assert k["gradcheck"]["cpu"]["checked"] >= 15 and k["gradcheck"]["cpu"]["failed"] == 0
    device = k["gradcheck"]["device"]
    assert (
        "against the float64 truth" in device["check"]
        and "no float64 on simdev:0" in device["check"]
    )
    assert "failures" not in device  # no float64 gradcheck was attempted there
    assert "on simdev:0 its gradients at its dtypes against the float64 truth" in k["reason"]
    # the op's values and gradients on the device, each claimed dtype but float64
    values = k["op_values"]
    assert values["failed"] == 0 and values["checked"] >= 3 * 5 * 3
    assert any(s.startswith("float64 not run on simdev:0") for s in values["skipped"])
    assert set(values["worst_rmse_ratio"]) == {"float32", "bfloat16", "float16"}
    assert any(s.startswith("float64 not run") for s in k["samples"]["skipped"])
    assert k["samples"]["failed"] == 0 and k["model"]["failed"] == 0
