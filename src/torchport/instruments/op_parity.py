"""Parity of one operator sample: the device's outputs against the CPU.

Three values per output: ``result`` (the device, at the case dtype), ``baseline`` (the CPU at
the case dtype: what the device may legitimately do) and ``reference`` (the CPU in float64 where
the op supports it, else the baseline).

- Integer and bool outputs (and Python ints/bools) must equal the baseline exactly: the
  float64 reference is not used for them, since a comparison such as isclose can round the
  other way in float64.
- Floating and complex outputs (complex as real pairs) pass when every non-finite device value
  is the baseline's or the reference's rounded to the output dtype (an op that overflows in
  float16 on the CPU may overflow on the device too; where both overflow, the device must), and
  on the entries finite on the device and in the reference either allclose to the reference at
  the tolerance, or RMSE(result, reference) <= k * RMSE(baseline, reference) + atol / 10
  (k = 2; 3 for bfloat16/float16 or small tensors), the rule of ``instruments/parity.py``.
- The device must return the same structure, shapes and dtypes as the baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SMALL_NUMEL = 16
# allclose tolerance by output dtype where OpInfo declares none (float32 as the model runs use).
DEFAULT_TOLERANCE = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "bfloat16": (1e-2, 1e-2),
    "float16": (1e-3, 1e-3),
    "complex128": (1e-7, 1e-7),
    "complex64": (1e-4, 1e-4),
    "complex32": (1e-3, 1e-3),
}
LOW_PRECISION = ("bfloat16", "float16", "complex32")


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    ok: bool
    exact: bool  # compared exactly (integer, bool, non-numeric)
    max_abs_err: float | None = None
    max_rel_err: float | None = None  # max |res - ref| / max(max |ref|, atol)
    detail: str = ""


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tolerance_for(dtype, override: tuple | None) -> tuple[float, float]:
    """(atol, rtol): OpInfo's override where it gives one (either may be None), else the
    default of the output dtype."""
    atol, rtol = DEFAULT_TOLERANCE.get(dtype_name(dtype), (1e-4, 1e-4))
    if override is not None:
        atol = override[0] if override[0] is not None else atol
        rtol = override[1] if override[1] is not None else rtol
    return atol, rtol


def compare(
    name: str, result, baseline, reference, *, tolerance: tuple[float, float] | None = None
) -> Check:
    """Compare one named output value (a tensor or a Python value)."""
    import torch

    if isinstance(baseline, torch.Tensor):
        if not isinstance(result, torch.Tensor):
            return Check(
                name=name,
                ok=False,
                exact=True,
                detail=f"device returned {type(result).__name__}, CPU a tensor",
            )
        return _compare_tensor(name, result, baseline, reference, tolerance)
    if isinstance(baseline, (float, complex)):
        if isinstance(result, bool) or not isinstance(result, (int, float, complex)):
            return Check(
                name=name,
                ok=False,
                exact=False,
                detail=f"device returned {type(result).__name__}, CPU a number",
            )
        if isinstance(reference, bool) or not isinstance(reference, (int, float, complex)):
            reference = baseline
        return _compare_tensor(
            name, _scalar(result), _scalar(baseline), _scalar(reference), tolerance
        )
    # ints, bools, sizes, dtypes, strings: exactly what the CPU returned
    ok = type(result) is type(baseline) and result == baseline
    return Check(
        name=name, ok=ok, exact=True, detail="" if ok else f"device {result!r} != CPU {baseline!r}"
    )


def _scalar(value):
    import torch

    return torch.tensor(
        value, dtype=torch.complex128 if isinstance(value, complex) else torch.float64
    )


def _compare_tensor(name, result, baseline, reference, tolerance) -> Check:
    import torch

    res = result.detach().to("cpu")
    if res.layout != torch.strided or baseline.layout != torch.strided:
        return Check(name=name, ok=False, exact=True, detail="non-strided layout")
    if res.dtype != baseline.dtype:
        return Check(
            name=name,
            ok=False,
            exact=True,
            detail=f"dtype {dtype_name(res.dtype)} != CPU {dtype_name(baseline.dtype)}",
        )
    if res.shape != baseline.shape:
        return Check(
            name=name,
            ok=False,
            exact=True,
            detail=f"shape {tuple(res.shape)} != CPU {tuple(baseline.shape)}",
        )
    if not (res.is_floating_point() or res.is_complex()):
        return _compare_exact(name, res, baseline)
    ref = (
        reference
        if isinstance(reference, torch.Tensor) and reference.shape == baseline.shape
        else baseline
    )
    return _compare_float(name, res, baseline.detach(), ref.detach(), tolerance)


def _compare_exact(name, res, base) -> Check:
    import torch

    if torch.equal(res, base):
        return Check(name=name, ok=True, exact=True, max_abs_err=0.0)
    wrong = res != base
    diff = (
        (res.to(torch.float64) - base.to(torch.float64)).abs().max().item()
        if res.dtype != torch.bool
        else 1.0
    )
    return Check(
        name=name,
        ok=False,
        exact=True,
        max_abs_err=diff,
        detail=f"{int(wrong.sum())} of {res.numel()} elements differ (exact compare)",
    )


def _real64(t):
    import torch

    t = torch.view_as_real(t.resolve_conj()) if t.is_complex() else t
    return t.to(torch.float64)


def _same_value(a, b):
    """Elementwise: equal, or both NaN."""
    import torch

    return (a == b) | (torch.isnan(a) & torch.isnan(b))


def _nonfinite_ok(r, b, rounded):
    """Per element: a non-finite device value must be the CPU's or the truth's (as the dtype
    holds it); where both of those are non-finite, the device must be too."""
    import torch

    fin_r, fin_b, fin_t = torch.isfinite(r), torch.isfinite(b), torch.isfinite(rounded)
    device_bad = ~fin_r & ~(_same_value(r, b) | _same_value(r, rounded))
    missing = fin_r & ~fin_b & ~fin_t
    return ~(device_bad | missing)


def _rmse(a, b) -> float:
    import torch

    return torch.sqrt(torch.mean((a - b) ** 2)).item() if a.numel() else 0.0


def _compare_float(name, res, base, ref, tolerance) -> Check:
    import torch

    atol, rtol = tolerance_for(res.dtype, tolerance)
    r, b, f = _real64(res), _real64(base), _real64(ref)
    rounded = _real64(ref.to(res.dtype))  # the truth as the output dtype can hold it
    elementwise = _nonfinite_ok(r, b, rounded)
    if not bool(elementwise.all()):
        return Check(
            name=name,
            ok=False,
            exact=False,
            max_abs_err=math.inf,
            max_rel_err=math.inf,
            detail=f"non-finite entries differ at {int((~elementwise).sum())} elements "
            f"({int((~torch.isfinite(r)).sum())} non-finite on the device, "
            f"{int((~torch.isfinite(b)).sum())} on the CPU)",
        )
    checked = torch.isfinite(r) & torch.isfinite(f)
    r, b, f = r[checked], b[checked], f[checked]
    max_abs = (r - f).abs().max().item() if r.numel() else 0.0
    scale = max(f.abs().max().item() if f.numel() else 0.0, atol)
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    if torch.allclose(r, f, atol=atol, rtol=rtol):
        return Check(name=name, ok=True, exact=False, max_abs_err=max_abs, max_rel_err=max_rel)
    # Within the CPU's own noise, where the CPU has a finite value to measure it by; where the
    # CPU overflowed and the device did not, within k times the tolerance of the truth.
    noisy = torch.isfinite(b)
    k = 3.0 if dtype_name(res.dtype) in LOW_PRECISION or r.numel() < SMALL_NUMEL else 2.0
    res_rmse, base_rmse = _rmse(r[noisy], f[noisy]), _rmse(b[noisy], f[noisy])
    ok = res_rmse <= k * base_rmse + atol / 10.0 and torch.allclose(
        r[~noisy], f[~noisy], atol=k * atol, rtol=k * rtol
    )
    detail = (
        ""
        if ok
        else (
            f"max abs err {max_abs:.3g} (rel {max_rel:.3g}) beyond atol {atol:g}"
            f" rtol {rtol:g}; RMSE {res_rmse:.3g} vs CPU {base_rmse:.3g}"
        )
    )
    return Check(
        name=name, ok=ok, exact=False, max_abs_err=max_abs, max_rel_err=max_rel, detail=detail
    )
