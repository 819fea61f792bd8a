"""Determinism first: two eager runs of the same step on the device, compared.

Before anything is judged against the reference, the device must agree with itself. The
difference between two eager runs with the same inputs and seed is recorded per tensor; its
RMSE feeds the parity allowance (noise the device has on its own is not a parity failure of
one run), and a device whose runs disagree beyond its dtype's ceiling gets a finding, since
no single run of it can then be trusted (PyTorch's benchmark harness: ``eager_two_runs_differ``).
"""

from __future__ import annotations

# Largest relative disagreement (max |a - b| / max |a|) two eager runs may show before the
# device is called nondeterministic: a few ulps of accumulated reduction-order noise pass.
CEILING = {"float32": 1e-5, "bfloat16": 1e-2, "float16": 1e-3, "float64": 1e-12}


def compare_runs(first: dict, second: dict, dtype: str) -> dict:
    """Per-tensor disagreement of two runs (CPU tensors); the verdict against the ceiling."""
    import torch

    ceiling = CEILING.get(dtype, CEILING["float32"])
    worst_name, worst_rel, noise, differing = None, 0.0, {}, []
    for name, a in first.items():
        b = second.get(name)
        if b is None or a.shape != b.shape:
            differing.append(name)
            continue
        a64, b64 = a.to(torch.float64), b.to(torch.float64)
        if torch.equal(a64, b64) or not a64.numel():
            noise[name] = 0.0
            continue
        diff = (a64 - b64).abs()
        finite = torch.isfinite(diff)
        if not bool(finite.all()):
            differing.append(name)
            worst_name, worst_rel = worst_name or name, float("inf")
            continue  # no finite noise to allow for
        noise[name] = torch.sqrt(torch.mean(diff**2)).item()
        rel = diff.max().item() / max(a64.abs().max().item(), 1e-30)
        differing.append(name)
        if rel > worst_rel:
            worst_name, worst_rel = name, rel
    found = {
        "identical": not differing,
        "differing_tensors": len(differing),
        "max_rel_diff": worst_rel,
        "worst_tensor": worst_name,
        "ceiling": ceiling,
        "dtype": dtype,
    }
    beyond = worst_rel > ceiling
    found["beyond_ceiling"] = beyond
    if beyond:
        found["finding"] = (
            f"two eager runs on the device disagree beyond the {dtype} ceiling "
            f"{ceiling:g}: max relative difference {worst_rel:.3g} on "
            f"{worst_name or differing[0]}; single runs of this device are "
            "not reproducible"
        )
    return {"summary": found, "noise_rmse": noise}
