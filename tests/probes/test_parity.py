"""The parity rule: allclose, else RMSE relative to the CPU's own error."""

import pytest

torch = pytest.importorskip("torch")

from torchport.probes.parity import compare, compare_tensor  # noqa: E402


def _pair(noise, seed=0):
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(1000, generator=g, dtype=torch.float64)
    return ref, ref + noise * torch.randn(1000, generator=g, dtype=torch.float64)


def test_allclose_passes_and_records_all_metrics():
    ref, res = _pair(1e-7)
    t = compare_tensor("x", res, ref, ref.float(), atol=1e-4, rtol=1e-4, low_precision=False)
    assert t.ok and t.max_abs_err < 1e-5 and t.cosine > 0.9999999


def _noisy(ref, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return ref + scale * torch.randn(ref.shape, generator=g, dtype=torch.float64)


def test_rmse_rule_accepts_noise_comparable_to_the_cpu():
    ref, base = _pair(1e-2, seed=1)
    res = _noisy(ref, 1.5e-2, seed=2)  # 1.5x the baseline's noise, far outside allclose
    t = compare_tensor("x", res, ref, base, atol=1e-4, rtol=1e-4, low_precision=False)
    assert t.ok and 1.2 < t.rmse_ratio < 1.8


def test_rmse_rule_rejects_noise_far_above_the_cpu():
    ref, base = _pair(1e-3, seed=1)
    res = _noisy(ref, 1e-2, seed=2)
    t = compare_tensor("x", res, ref, base, atol=1e-4, rtol=1e-4, low_precision=False)
    assert not t.ok and t.rmse_ratio > 5


def test_low_precision_uses_the_larger_multiplier():
    ref, base = _pair(1e-2, seed=1)
    res = ref + 2.5 * (base - ref)  # 2.5x: fails k=2, passes k=3
    args = dict(atol=1e-6, rtol=1e-6)
    assert not compare_tensor("x", res, ref, base, low_precision=False, **args).ok
    assert compare_tensor("x", res, ref, base, low_precision=True, **args).ok


def test_nan_fails_and_missing_tensor_is_reported():
    ref = torch.ones(4, dtype=torch.float64)
    res = torch.tensor([1.0, float("nan"), 1.0, 1.0])
    report = compare({"a": res}, {"a": ref, "b": ref}, {"a": ref, "b": ref}, atol=1e-4,
                     rtol=1e-4, low_precision=False)
    assert not report.ok and set(report.failures()) == {"a", "b"}


def test_relative_error_is_not_inflated_by_a_numerically_zero_reference():
    ref = torch.full((8,), 1e-17, dtype=torch.float64)  # a gradient that cancelled out
    res = ref + 1e-9
    t = compare_tensor("g", res, ref, ref.float(), atol=1e-4, rtol=1e-4, low_precision=False)
    assert t.ok and t.max_rel_err == pytest.approx(1e-9 / 1e-4)  # floored at atol, not 1e8
    big = torch.full((8,), 2.0, dtype=torch.float64)
    t = compare_tensor("w", big + 0.02, big, big.float(), atol=1e-4, rtol=1e-4,
                       low_precision=False)
    assert t.max_rel_err == pytest.approx(0.01)  # above atol: plain max |err| / max |ref|
