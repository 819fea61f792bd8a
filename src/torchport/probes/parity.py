"""Parity: compare a result against the float64 reference, relative to the device's own noise.

Pass when allclose at the tolerance; else when RMSE(result, fp64) <= k * RMSE(baseline, fp64)
+ atol / 10, with the baseline the same case run on the CPU at the run's dtype (k = 2; 3 for
bfloat16/float16 or small tensors) -- the rule of PyTorch's own benchmark harness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PROBE_VERSION = 1
SMALL_NUMEL = 16  # below this, RMSE is noisy: use the larger multiplier


@dataclass(frozen=True, kw_only=True)
class TensorParity:
    name: str
    ok: bool
    max_abs_err: float
    max_rel_err: float  # max |res - ref| / max(max |ref|, atol)
    rmse_ratio: float | None  # RMSE(res, fp64) / RMSE(baseline, fp64); None if baseline exact
    cosine: float


@dataclass(kw_only=True)
class ParityReport:
    ok: bool
    tensors: list[TensorParity] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def metrics(self) -> dict:
        if not self.tensors:
            return {}
        ratios = [t.rmse_ratio for t in self.tensors if t.rmse_ratio is not None]
        return {"parity_max_abs_err": max(t.max_abs_err for t in self.tensors),
                "parity_max_rel_err": max(t.max_rel_err for t in self.tensors),
                "parity_rmse_ratio": max(ratios) if ratios else None,
                "parity_cosine": min(t.cosine for t in self.tensors),
                "parity_tensors": len(self.tensors)}

    def failures(self) -> list[str]:
        return [t.name for t in self.tensors if not t.ok] + self.missing


def _rmse(a, b) -> float:
    import torch
    return torch.sqrt(torch.mean((a - b) ** 2)).item()


def compare_tensor(name: str, result, reference, baseline, *, atol: float, rtol: float,
                   low_precision: bool, noise_rmse: float = 0.0) -> TensorParity:
    """result: device output; reference: CPU float64; baseline: CPU at the run's dtype.

    noise_rmse: RMSE between two eager runs of the device (probes/determinism.py); the
    device's own run-to-run noise is allowed on top of the CPU's."""
    import torch
    res = result.detach().to("cpu", torch.float64)
    ref = reference.detach().to(torch.float64)
    base = baseline.detach().to("cpu", torch.float64)
    if res.shape != ref.shape:
        return TensorParity(name=name, ok=False, max_abs_err=math.inf, max_rel_err=math.inf,
                            rmse_ratio=None, cosine=-1.0)
    diff = (res - ref).abs()
    max_abs = diff.max().item() if diff.numel() else 0.0
    ref_scale = ref.abs().max().item() if ref.numel() else 0.0
    # Normalised by the reference's largest magnitude, but never by less than atol: a tensor
    # whose reference is numerically zero (a gradient that cancels to 1e-17) would otherwise
    # turn a harmless 1e-9 difference into a "relative error" of 1e8.
    scale = max(ref_scale, atol)
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    res_rmse, base_rmse = _rmse(res, ref), _rmse(base, ref)
    ratio = res_rmse / base_rmse if base_rmse > 0 else None
    flat_res, flat_ref = res.flatten(), ref.flatten()
    norms = flat_res.norm() * flat_ref.norm()
    cosine = (flat_res @ flat_ref / norms).item() if norms > 0 else float(
        torch.equal(flat_res, flat_ref))
    # A reference that is not finite cannot vouch for anything (NaN on both sides is no
    # agreement), and a non-finite result never passes.
    finite = bool(torch.isfinite(res).all()) and bool(torch.isfinite(ref).all())
    ok = finite and torch.allclose(res, ref, atol=atol, rtol=rtol)
    if not ok and finite:
        k = 3.0 if low_precision or res.numel() < SMALL_NUMEL else 2.0
        ok = res_rmse <= k * base_rmse + atol / 10.0 + noise_rmse
    return TensorParity(name=name, ok=ok, max_abs_err=max_abs, max_rel_err=max_rel,
                        rmse_ratio=ratio, cosine=cosine)


def compare(result: dict, reference: dict, baseline: dict, *, atol: float, rtol: float,
            low_precision: bool, noise: dict | None = None) -> ParityReport:
    """Compare every named tensor of the reference with the result's tensor of the same name.

    noise: per tensor, the RMSE between two eager runs on the device (None: not measured)."""
    report = ParityReport(ok=True)
    for name, ref in reference.items():
        if name not in result or name not in baseline:
            report.missing.append(name)
            continue
        report.tensors.append(compare_tensor(name, result[name], ref, baseline[name], atol=atol,
                                             rtol=rtol, low_precision=low_precision,
                                             noise_rmse=(noise or {}).get(name, 0.0)))
    report.ok = not report.failures()
    return report
