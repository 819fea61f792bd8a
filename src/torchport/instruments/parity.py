"""Parity: compare a result against the float64 reference, relative to the device's own noise.

Per tensor, against the CPU float64 reference (``ref``):
  pass when allclose(result, ref, atol, rtol);
  else when RMSE(result, ref) <= min(allowance, ceiling), where
    allowance = k * RMSE(baseline, ref) + atol / 10 + noise   (the baseline: the same case on
                the CPU at the run's dtype; k = 2, 3 for bfloat16/float16 or small tensors: the
                rule of PyTorch's own benchmark harness; noise: the RMSE between two eager runs
                of the device, instruments/determinism.py), and
    ceiling   = CEILING[dtype] * RMS(ref) + atol / 10 (no allowance exceeds it, so an error the
                device shares with the CPU float32 run is not forgiven).

Basis: on ``--device cpu`` in eager mode at the run's dtype the result *is* the baseline; it is
recorded as such (``basis: "baseline"``) and judged by the ceiling alone, never passed against
itself. Every other result has basis "device"; results that are not the baseline also carry
their distance to it (``parity_vs_baseline_*``: compiled CPU against eager CPU).

Cosine similarity is taken only over tensors whose reference has a non-negligible norm (RMS
above atol): the cosine of a gradient that cancels to 1e-17 is noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PROBE_VERSION = 2
SMALL_NUMEL = 16  # below this, RMSE is noisy: use the larger multiplier
# Relative RMS error (RMSE / RMS of the reference) that no allowance exceeds, per dtype: a few
# hundred ulps of accumulated rounding for float32, a few bits for the 8- and 11-bit mantissas.
CEILING = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 5e-2}
WORST_SHOWN = 5


@dataclass(frozen=True, kw_only=True)
class TensorParity:
    name: str
    ok: bool
    max_abs_err: float
    max_rel_err: float  # max |res - ref| / max(max |ref|, atol)
    rmse_ratio: float | None  # RMSE(res, fp64) / RMSE(baseline, fp64); None if baseline exact
    cosine: float
    rmse: float = 0.0  # RMSE(res, fp64)
    allowed_rmse: float = math.inf  # the RMSE it had to stay under (after allclose failed)
    ref_rms: float = 0.0
    vs_baseline_max_abs_err: float | None = None

    @property
    def excess(self) -> float:
        """How far past what was allowed (RMSE / allowed); inf for a shape or NaN mismatch."""
        if not math.isfinite(self.rmse) or not math.isfinite(self.max_abs_err):
            return math.inf
        return self.rmse / self.allowed_rmse if self.allowed_rmse > 0 else math.inf

    def summary(self) -> dict:
        return {
            "name": self.name,
            "max_abs_err": _finite(self.max_abs_err),
            "max_rel_err": _finite(self.max_rel_err),
            "rmse": _finite(self.rmse),
            "allowed_rmse": _finite(self.allowed_rmse),
            "rmse_ratio": _finite(self.rmse_ratio),
            "excess": _finite(self.excess),
        }


@dataclass(kw_only=True)
class ParityReport:
    ok: bool
    basis: str = "device"
    dtype: str = "float32"
    tensors: list[TensorParity] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    atol: float = 0.0

    def metrics(self) -> dict:
        if not self.tensors:
            return {}
        ratios = [t.rmse_ratio for t in self.tensors if t.rmse_ratio is not None]
        sized = [t for t in self.tensors if t.ref_rms > self.atol]
        metrics = {
            "parity_max_abs_err": max(t.max_abs_err for t in self.tensors),
            "parity_max_rel_err": max(t.max_rel_err for t in self.tensors),
            "parity_rmse_ratio": max(ratios) if ratios else None,
            "parity_cosine": min(t.cosine for t in sized) if sized else None,
            "parity_cosine_tensors": len(sized),
            "parity_tensors": len(self.tensors),
            "parity_failing_tensors": len(self.failures()),
        }
        vs_base = [
            t.vs_baseline_max_abs_err for t in self.tensors if t.vs_baseline_max_abs_err is not None
        ]
        if vs_base:
            metrics["parity_vs_baseline_max_abs_err"] = max(vs_base)
        return metrics

    def failures(self) -> list[str]:
        return [t.name for t in self.tensors if not t.ok] + self.missing

    def worst(self, n: int = WORST_SHOWN) -> list[TensorParity]:
        failing = [t for t in self.tensors if not t.ok]
        return sorted(failing, key=lambda t: (-t.excess, t.name))[:n]

    def findings(self) -> dict:
        """findings["parity"]: the basis, the rule's ceiling, and the failing tensors."""
        ceiling = CEILING[self.dtype] if self.basis in ("device", "baseline") else None
        return {
            "basis": self.basis,
            "dtype": self.dtype,
            "ceiling": ceiling,
            "tensors": len(self.tensors),
            "failing": len(self.failures()),
            "missing": self.missing[:20],
            "worst": [t.summary() for t in self.worst()],
        }

    def message(self) -> str:
        """One line for the error (short enough for a table cell): how many failed, the worst
        with its error and ratios; the full figures are in ``findings()``."""
        failing = self.failures()
        text = f"{len(failing)} / {len(self.tensors) + len(self.missing)} tensors outside tolerance"
        worst = self.worst(1)
        if worst:
            t = worst[0]
            text += f"; worst {t.name}: rel err {t.max_rel_err:.2g}, RMSE {t.excess:.3g}x allowed"
            if t.rmse_ratio is not None:
                text += f" ({t.rmse_ratio:.3g}x the CPU {self.dtype} error)"
        if self.missing:
            text += f"; missing: {', '.join(self.missing[:5])}"
        return text


def _finite(x):
    return x if x is None or math.isfinite(x) else None


def _rmse(a, b) -> float:
    import torch

    return torch.sqrt(torch.mean((a - b) ** 2)).item() if a.numel() else 0.0


def compare_tensor(
    name: str,
    result,
    reference,
    baseline,
    *,
    atol: float,
    rtol: float,
    low_precision: bool,
    noise_rmse: float = 0.0,
    dtype: str = "float32",
    basis: str = "device",
) -> TensorParity:
    """result: device output; reference: CPU float64; baseline: CPU at the run's dtype.

    noise_rmse: RMSE between two eager runs of the device (instruments/determinism.py); the
    device's own run-to-run noise is allowed on top of the CPU's, under the ceiling."""
    import torch

    res = result.detach().to("cpu", torch.float64)
    ref = reference.detach().to(torch.float64)
    base = baseline.detach().to("cpu", torch.float64)
    if res.shape != ref.shape:
        return TensorParity(
            name=name,
            ok=False,
            max_abs_err=math.inf,
            max_rel_err=math.inf,
            rmse_ratio=None,
            cosine=-1.0,
            rmse=math.inf,
        )
    diff = (res - ref).abs()
    max_abs = diff.max().item() if diff.numel() else 0.0
    ref_scale = ref.abs().max().item() if ref.numel() else 0.0
    # Normalised by the reference's largest magnitude, but never by less than atol: a tensor
    # whose reference is numerically zero (a gradient that cancels to 1e-17) would otherwise
    # turn a harmless 1e-9 difference into a "relative error" of 1e8.
    scale = max(ref_scale, atol)
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    res_rmse, base_rmse = _rmse(res, ref), _rmse(base, ref)
    ref_rms = torch.sqrt(torch.mean(ref**2)).item() if ref.numel() else 0.0
    ratio = res_rmse / base_rmse if base_rmse > 0 else None
    flat_res, flat_ref = res.flatten(), ref.flatten()
    norms = flat_res.norm() * flat_ref.norm()
    cosine = (
        (flat_res @ flat_ref / norms).item()
        if norms > 0
        else float(torch.equal(flat_res, flat_ref))
    )
    ceiling = CEILING[dtype] * ref_rms + atol / 10.0
    if basis == "baseline":  # the result is the baseline: its own noise allows nothing
        allowed = ceiling
    else:
        k = 3.0 if low_precision or res.numel() < SMALL_NUMEL else 2.0
        allowed = min(k * base_rmse + atol / 10.0 + noise_rmse, ceiling)
    # A reference that is not finite cannot vouch for anything (NaN on both sides is no
    # agreement), and a non-finite result never passes.
    finite = bool(torch.isfinite(res).all()) and bool(torch.isfinite(ref).all())
    ok = finite and (torch.allclose(res, ref, atol=atol, rtol=rtol) or res_rmse <= allowed)
    vs_base = None
    if basis != "baseline" and base.shape == res.shape and res.numel():
        vs_base = (res - base).abs().max().item()
    return TensorParity(
        name=name,
        ok=ok,
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        rmse_ratio=ratio,
        cosine=cosine,
        rmse=res_rmse,
        allowed_rmse=allowed,
        ref_rms=ref_rms,
        vs_baseline_max_abs_err=vs_base,
    )


def compare(
    result: dict,
    reference: dict,
    baseline: dict,
    *,
    atol: float,
    rtol: float,
    low_precision: bool,
    noise: dict | None = None,
    dtype: str = "float32",
    basis: str = "device",
) -> ParityReport:
    """Compare every named tensor of the reference with the result's tensor of the same name.

    noise: per tensor, the RMSE between two eager runs on the device (None: not measured)."""
    report = ParityReport(ok=True, basis=basis, dtype=dtype, atol=atol)
    for name, ref in reference.items():
        if name not in result or name not in baseline:
            report.missing.append(name)
            continue
        report.tensors.append(
            compare_tensor(
                name,
                result[name],
                ref,
                baseline[name],
                atol=atol,
                rtol=rtol,
                low_precision=low_precision,
                noise_rmse=(noise or {}).get(name, 0.0),
                dtype=dtype,
                basis=basis,
            )
        )
    report.ok = not report.failures()
    return report
