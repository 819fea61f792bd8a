"""Operator parity: integer and bool outputs exactly, floats against float64 within the CPU's
noise."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from torchport.instruments.op_parity import compare


def test_integer_outputs_compare_exactly_whatever_the_tolerance():
    base = torch.arange(100, dtype=torch.int64) * 1000
    wrong = base.clone()
    wrong[7] += 1  # off by one in 100 000: any float tolerance would accept it
    check = compare("out", wrong, base, base, tolerance=(1.0, 1.0))
    assert not check.ok and check.exact
    assert "1 of 100 elements differ" in check.detail
    assert compare("out", base.clone(), base, base).ok


def test_bool_outputs_compare_exactly():
    base = torch.tensor([True, False, True])
    assert compare("out", base.clone(), base, base).ok
    check = compare("out", torch.tensor([True, True, True]), base, base)
    assert not check.ok and check.exact and check.max_abs_err == 1.0


def test_python_ints_and_bools_are_exact_and_typed():
    assert compare("out", 3, 3, 3).ok
    assert not compare("out", 4, 3, 3).ok
    assert not compare("out", True, 1, 1).ok  # a bool where the CPU returned an int


def test_float_close_to_the_float64_reference_passes():
    ref = torch.linspace(-3, 3, 64, dtype=torch.float64)
    base = ref.to(torch.float32)
    res = base + 1e-6
    check = compare("out", res, base, ref)
    assert check.ok and not check.exact
    assert check.max_abs_err == pytest.approx(1e-6, rel=0.2)


def test_float_off_by_a_lot_fails_with_figures():
    ref = torch.linspace(-3, 3, 64, dtype=torch.float64)
    base = ref.to(torch.float32)
    check = compare("out", base * 1.01, base, ref)
    assert not check.ok
    assert "max abs err" in check.detail and check.max_rel_err > 1e-3


def test_low_precision_within_the_cpu_noise_passes():
    # bfloat16 rounding on the device, as on the CPU: no better, no worse than the baseline
    ref = torch.randn(256, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 100
    base = ref.to(torch.bfloat16)
    res = base.clone()
    assert compare("out", res, base, ref, tolerance=(0.0, 0.0)).ok


def test_overflow_like_the_cpu_is_not_a_failure():
    ref = torch.tensor([1e5, 1.0], dtype=torch.float64)  # fits float64, not float16
    base = ref.to(torch.float16)  # [inf, 1]
    assert math.isinf(base[0].item())
    assert compare("out", base.clone(), base, ref).ok
    check = compare("out", torch.tensor([1.0, 1.0], dtype=torch.float16), base, ref)
    assert not check.ok and "non-finite" in check.detail


def test_shape_and_dtype_must_match_the_cpu():
    base = torch.zeros(2, 3)
    assert "shape" in compare("out", torch.zeros(3, 2), base, base).detail
    assert "dtype" in compare("out", torch.zeros(2, 3, dtype=torch.float64), base, base).detail
    assert not compare("out", 0.0, base, base).ok


def test_complex_outputs_compare_as_real_pairs():
    ref = torch.randn(8, dtype=torch.complex128, generator=torch.Generator().manual_seed(1))
    base = ref.to(torch.complex64)
    assert compare("out", base.clone(), base, ref).ok
    assert not compare("out", base * 1j, base, ref).ok


def test_nonfinite_is_judged_per_element():
    ref = torch.tensor([1e5, 7e4, 2.0], dtype=torch.float64)  # float16 max is 65504
    cpu = torch.tensor([math.inf, math.inf, 2.0], dtype=torch.float16)
    # 7e4 does not fit float16 either: where the CPU and the truth overflow, so must the device
    assert not compare(
        "out", torch.tensor([math.inf, 65504.0, 2.0], dtype=torch.float16), cpu, ref
    ).ok
    ref = torch.tensor([1e5, 6e4, 2.0], dtype=torch.float64)  # 6e4 fits: the CPU overflowed
    better = torch.tensor([math.inf, 6e4, 2.0], dtype=torch.float16)
    assert compare("out", better, cpu, ref).ok  # fewer overflows than the CPU
    assert not compare(
        "out", torch.tensor([math.inf, 5e4, 2.0], dtype=torch.float16), cpu, ref
    ).ok  # finite, but wrong
