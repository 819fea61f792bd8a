"""The parity rule: allclose, else RMSE relative to the CPU's own error, under a ceiling per
dtype; the CPU's own float32 run as the baseline it is; cosine over tensors that have a norm."""

import pytest

torch = pytest.importorskip("torch")

from torchport.instruments.parity import compare, compare_tensor  # noqa: E402


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
    ref, base = _pair(2e-4, seed=1)
    res = _noisy(ref, 3e-4, seed=2)  # 1.5x the baseline's noise, outside allclose
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
    args = dict(atol=1e-6, rtol=1e-6, dtype="bfloat16")
    assert not compare_tensor("x", res, ref, base, low_precision=False, **args).ok
    assert compare_tensor("x", res, ref, base, low_precision=True, **args).ok


def test_ceiling_does_not_forgive_an_error_the_cpu_shares():
    # 1% off in float32 on the device and on the CPU alike: the allowance from the CPU's own
    # error would be 2%, but float32 must be within 0.1% (RMS) of float64.
    ref = _pair(0)[0]
    wrong = ref * 1.01
    t = compare_tensor("g", wrong, ref, wrong, atol=1e-4, rtol=1e-4, low_precision=False)
    assert not t.ok and t.rmse_ratio == pytest.approx(1.0)
    assert t.allowed_rmse == pytest.approx(1e-3 * t.ref_rms + 1e-5)
    assert compare_tensor(
        "g", wrong, ref, wrong, atol=1e-4, rtol=1e-4, low_precision=False, dtype="bfloat16"
    ).ok  # within bfloat16's ceiling


def test_cpu_baseline_is_judged_by_the_ceiling_alone():
    ref = _pair(0)[0]
    good, wrong = _noisy(ref, 3e-4, seed=3), ref * 1.01
    # The result is the baseline: as "device" a 1% error would pass against itself if not for
    # the ceiling; as "baseline" only the ceiling counts, and nothing is compared with itself.
    t = compare_tensor(
        "g", wrong, ref, wrong, atol=1e-4, rtol=1e-4, low_precision=False, basis="baseline"
    )
    assert not t.ok and t.vs_baseline_max_abs_err is None
    assert compare_tensor(
        "g", good, ref, good, atol=1e-4, rtol=1e-4, low_precision=False, basis="baseline"
    ).ok


def test_cosine_only_over_tensors_with_a_norm_and_failures_named_with_their_error():
    ref = _pair(0)[0]
    tiny = torch.full((8,), 1e-9, dtype=torch.float64)
    result = {"w": ref * 1.05, "g": -tiny, "b": ref.clone()}
    report = compare(
        result,
        {"w": ref, "g": tiny, "b": ref},
        {"w": ref, "g": tiny, "b": ref},
        atol=1e-4,
        rtol=1e-4,
        low_precision=False,
    )
    metrics = report.metrics()
    assert metrics["parity_cosine"] == pytest.approx(1.0)  # g (cosine -1) has no norm
    assert metrics["parity_cosine_tensors"] == 2
    assert metrics["parity_failing_tensors"] == 1 and report.failures() == ["w"]
    worst = report.findings()["worst"]
    assert [w["name"] for w in worst] == ["w"] and worst[0]["max_rel_err"] > 0.04
    assert worst[0]["excess"] > 10
    assert report.message().startswith(
        "1 / 3 tensors outside tolerance; worst w: rel err 0.05, RMSE "
    )


def test_nan_fails_and_missing_tensor_is_reported():
    ref = torch.ones(4, dtype=torch.float64)
    res = torch.tensor([1.0, float("nan"), 1.0, 1.0])
    report = compare(
        {"a": res},
        {"a": ref, "b": ref},
        {"a": ref, "b": ref},
        atol=1e-4,
        rtol=1e-4,
        low_precision=False,
    )
    assert not report.ok and set(report.failures()) == {"a", "b"}


def test_relative_error_is_not_inflated_by_a_numerically_zero_reference():
    ref = torch.full((8,), 1e-17, dtype=torch.float64)  # a gradient that cancelled out
    res = ref + 1e-9
    t = compare_tensor("g", res, ref, ref.float(), atol=1e-4, rtol=1e-4, low_precision=False)
    assert t.ok and t.max_rel_err == pytest.approx(1e-9 / 1e-4)  # floored at atol, not 1e8
    big = torch.full((8,), 2.0, dtype=torch.float64)
    t = compare_tensor("w", big + 0.02, big, big.float(), atol=1e-4, rtol=1e-4, low_precision=False)
    assert t.max_rel_err == pytest.approx(0.01)  # above atol: plain max |err| / max |ref|
