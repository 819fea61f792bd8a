"""A workload folder's ``@replacement`` function selects the kernel ladder; a function that
returns something else is refused with what to fix. The built-in ops' checks, directly."""

import pytest
import torch

from torchport.cases import kernels
from torchport.cases.workload import WorkloadCase, WorkloadError
from torchport.runner import kernel_checks

MODULE = """
from torchport.cases.kernels import replacement, rms_norm_replacement

@replacement
def good():
    return rms_norm_replacement("rms_norm")

@replacement
def bad():
    return {"not": "a replacement"}

def plain():
    return {}
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "team_kernels.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_marked_function_selects_the_kernel_ladder(folder):
    case = WorkloadCase("team_kernels:good")
    assert case.ladder == "kernel"
    assert case.replacement().name == "rms_norm"
    assert WorkloadCase("team_kernels:plain").ladder is None
    assert WorkloadCase("no_such_module:f").ladder is None  # build says why


def test_a_marked_function_must_return_a_replacement(folder):
    with pytest.raises(WorkloadError, match="must return torchport.cases.kernels.Replacement"):
        WorkloadCase("team_kernels:bad").replacement()


def test_builtin_ops_opcheck_and_gradcheck_verdicts():
    ops = kernels.builtin_ops()
    f32 = kernels.rms_norm_samples(torch.float32, "cpu")
    f64 = kernels.rms_norm_samples(torch.float64, "cpu")
    assert kernel_checks.opcheck(ops["rms_norm"], f32)["failed"] == 0
    bad_fake = kernel_checks.opcheck(ops["rms_norm_bad_fake"], f32)
    assert bad_fake["failed"] == 3 and bad_fake["failures"][0]["test"] == "test_faketensor"
    assert kernel_checks.gradcheck(ops["rms_norm"], f64)["failed"] == 0
    assert kernel_checks.gradcheck(ops["rms_norm_slow"], f64)["failed"] == 0
    bad = kernel_checks.gradcheck(ops["rms_norm_bad_backward"], f64)
    assert bad["failed"] == 3 and "Jacobian mismatch" in bad["failures"][0]["message"]
