"""Replacements judged against the float64 truth (runner/kernels/truth.py), on variants of the
inputs the model gives (runner/kernels/variants.py), positional and keyword: no model, no
ladder, a second or two each. The same through the CLI from a user's folder is in
tests/runner/test_kernel_user.py."""

from __future__ import annotations

import copy

import hypothesis
import hypothesis.strategies as st
import pytest
import torch

from torchport.runner.kernels import truth as kernel_truth
from torchport.runner.kernels import variants as kernel_variants
from torchport.runner.kernels.ladder import KernelLadder


class Norm(torch.nn.Module):
    """LlamaRMSNorm's arithmetic: float32 inside, rounded after normalising, scaled after."""

    def __init__(self, hidden: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(hidden).uniform_(0.3, 3.0))  # not 1
        self.variance_epsilon = 1e-6

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(x.dtype)


class OneRounding(torch.nn.Module):
    """Right, and rounds once: the weight applied in float32 before the cast."""

    def __init__(self, original):
        super().__init__()
        self.weight = original.weight
        self.eps = original.variance_epsilon

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.to(torch.float32) * h).to(x.dtype)


def test_a_float16_replacement_as_close_to_the_truth_as_the_original_passes():
    """Hidden states of an embedding's size (std 0.01: rstd ~100 magnifies the float16
    rounding of the gradient), norm weights not 1."""
    torch.manual_seed(0)
    norm = Norm(64)
    x = torch.randn(4, 16, 64) * 0.01
    found = kernel_variants.from_module_input(x)
    report = kernel_truth.module_samples(
        norm,
        norm,
        OneRounding,
        found,
        ("float32", "float16"),
        trains=True,
        device="cpu",
        support={},
    )
    assert report["failed"] == 0, report["failures"]
    assert report["checked"] == 2 * len(found)
    # the test means something: the two float16 input gradients differ from each other by
    # more than float16's tolerance (what the samples were once compared by)
    atol = kernel_truth.TOLERANCES["float16"][0] * kernel_truth.GRAD_SLACK
    cot = torch.randn(4, 16, 64).half()
    grads = []
    for module in (copy.deepcopy(norm).half(), OneRounding(copy.deepcopy(norm).half())):
        leaf = x.half().requires_grad_(True)
        module(leaf).backward(cot)
        grads.append(leaf.grad.double())
    assert not torch.allclose(grads[1], grads[0], atol=atol, rtol=atol)


class Mix(torch.nn.Module):
    """A block that takes its inputs by keyword, as transformers' attention does."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, hidden_states, scale=None):
        return self.proj(hidden_states) * scale


def _rows_assumed(x):
    """A loader that reads x's storage as if x were contiguous."""
    strides = torch.empty(x.shape).stride()
    return torch.as_strided(x, x.shape, strides, x.storage_offset())


class MixFused(torch.nn.Module):
    loader = staticmethod(lambda x: x)

    def __init__(self, original):
        super().__init__()
        self.proj = original.proj

    def forward(self, hidden_states, scale=None):
        return self.proj(self.loader(hidden_states)) * scale


class MixRowsAssumed(MixFused):
    loader = staticmethod(_rows_assumed)


@pytest.mark.parametrize(("make", "wrong"), [(MixFused, False), (MixRowsAssumed, True)])
def test_keyword_inputs_are_varied_and_a_layout_bug_is_named(make, wrong):
    torch.manual_seed(0)
    mix = Mix()
    kwargs = {"hidden_states": torch.randn(3, 5, 8), "scale": torch.rand(3, 5, 1) + 0.5}
    found = kernel_variants.variants((), kwargs, sizes=False)
    report = kernel_truth.module_samples(
        mix, mix, make, found, ("float32",), trains=True, device="cpu", support={}
    )
    assert report["checked"] == len(found) == 5
    if not wrong:
        assert report["failed"] == 0, report["failures"]
        return
    named = {f["sample"] for f in report["failures"]}
    assert "as_given" not in named and "sliced" not in named  # contiguous: right
    assert {"non_contiguous", "transposed"} <= named
    assert report["failures"][0]["sample"] == "non_contiguous"
    assert "from the float64 truth" in report["failures"][0]["message"]


def test_the_module_input_is_captured_with_its_keyword_arguments():
    from torchport.cases.base import Workload
    from torchport.cases.kernels import Replacement
    from torchport.config import RunConfig
    from torchport.devices.cpu import CPUAdapter

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = Mix()

        def forward(self, x):
            return self.mix(hidden_states=x, scale=torch.ones(1))

    workload = Workload(model=Net(), args=(torch.randn(2, 3, 8),))
    rep = Replacement(name="mix", target="Mix", make=MixFused)
    config = RunConfig(suite="kernels", device="cpu")

    class Case:
        id, version, tags = "kernels/mix", 1, ("kernel",)

    ladder = KernelLadder(Case(), "eager", config, CPUAdapter(), lambda e: None, {})
    args, kwargs, module = ladder._module_input(workload, rep)
    assert args == () and set(kwargs) == {"hidden_states", "scale"}
    assert module is workload.model.mix


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(
    shape=st.lists(st.integers(0, 4), min_size=0, max_size=4),
    extra=st.sampled_from([None, 3, "text"]),
)
def test_variants_of_any_sample_keep_shapes_and_layout_values(shape, extra):
    """Any tensor shape (empty dims and 0-d included): every layout variant has the sample's
    shape, the values it was given where the layout keeps them, and other values untouched."""
    x = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    kwargs = {"x": x, "extra": extra}
    for var in kernel_variants.variants((), kwargs):
        _, got = var.call_args(var.leaves(torch.float32, "cpu"))
        assert got["extra"] == extra
        if var.name in ("one_row", "odd_rows"):
            assert got["x"].shape[1:] == x.shape[1:]
            continue
        assert got["x"].shape == x.shape, var.name
        if var.name != "expanded":
            assert torch.equal(got["x"], x), var.name


@torch.library.custom_op("torchport_test::scale_rows_assumed", mutates_args=())
def _scale_rows_assumed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x * w, its kernel reading x's storage as if x were contiguous (a loader's bug)."""
    return _rows_assumed(x) * w


@_scale_rows_assumed.register_fake
def _(x, w):
    return torch.empty(x.shape, dtype=x.dtype)


def test_an_op_wrong_only_on_a_layout_fails_op_values_naming_the_sample():
    g = torch.Generator().manual_seed(0)
    samples = [((torch.randn(3, 8, generator=g), torch.rand(8, generator=g) + 0.5), {})]
    found = [
        v for i, (a, k) in enumerate(samples) for v in kernel_variants.variants(a, k, sample=i)
    ]
    report = kernel_truth.op_values(
        _scale_rows_assumed,
        found,
        ("float32", "bfloat16"),
        "cpu",
        trains=False,
        support={"bfloat16": (False, "bfloat16 refused: abs raised ...")},
    )
    named = {f["sample"] for f in report["failures"]}
    assert "sample 0 as_given" not in named and "sample 0 sliced" not in named
    assert {"sample 0 non_contiguous", "sample 0 transposed"} <= named
    assert report["skipped"] == ["bfloat16 not run on cpu: bfloat16 refused: abs raised ..."]
    assert report["checked"] == len(found)  # float32 only
