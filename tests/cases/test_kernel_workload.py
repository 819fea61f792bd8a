"""A workload folder's ``@replacement`` function selects the kernel ladder; a function that
returns something else is refused with what to fix. The built-in ops' checks, directly."""

import pytest
import torch

from torchport.cases import kernels
from torchport.cases.workload import WorkloadCase, WorkloadError
from torchport.runner.kernels import checks as kernel_checks

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
    from torchport.runner.kernels import truth as kernel_truth
    from torchport.runner.kernels import variants as kernel_variants

    ops = kernels.builtin_ops()
    f32 = kernels.rms_norm_samples(torch.float32, "cpu")
    assert kernel_checks.opcheck(ops["rms_norm"], f32)["failed"] == 0
    bad_fake = kernel_checks.opcheck(ops["rms_norm_bad_fake"], f32)
    assert bad_fake["failed"] == 3 and bad_fake["failures"][0]["test"] == "test_faketensor"
    # gradcheck on every variant of the samples (layouts, sizes), float64 on the CPU
    found = [
        v
        for i, (args, kwargs) in enumerate(kernels.rms_norm_samples(torch.float64, "cpu"))
        for v in kernel_variants.variants(args, kwargs, i)
    ]
    assert {"non_contiguous", "transposed", "sliced", "expanded", "odd_rows"} <= {
        v.name for v in found
    }
    assert kernel_truth.gradcheck(ops["rms_norm"], found, "cpu")["failed"] == 0
    bad = kernel_truth.gradcheck(ops["rms_norm_bad_backward"], found, "cpu")
    assert bad["failed"] >= 3 and "Jacobian mismatch" in bad["failures"][0]["message"]
    # the fake kernel keeps a transposed input's layout, as the real kernel does
    transposed = [v for v in found if v.name == "transposed"]
    calls = [v.call_args(v.leaves(torch.float32, "cpu")) for v in transposed]
    assert kernel_checks.opcheck(ops["rms_norm"], calls)["failed"] == 0
