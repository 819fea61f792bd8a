"""FlexAttention extras for ``flex`` cases: the block-mask build, timed apart, and SDPA parity.

block mask  The case is built again at its perf size (the size perf times steps at; for flex
            cases the parity size) and its BlockMask built on the device 1 + REPEATS times
            between device synchronisations: the wait before the first step that neither the
            compile time nor the step time holds.
SDPA        Where the variant has an equivalent SDPA call, this mode's result (compiled in
            compile mode) is compared with SDPA's on the same device and dtype. The float64
            reference (the ladder's parity) stays the judge: a difference here is a finding,
            not a status. SDPA's step time is the perf probe's ``perf_sdpa_median_ms``.

Metrics: flex_block_mask_build_ms (median) flex_block_mask_build_first_ms
         flex_block_sparsity_pct flex_sdpa_max_abs_err flex_sdpa_max_rel_err
"""

from __future__ import annotations

import dataclasses
import statistics

from torchport.cases.base import Size
from torchport.probes.base import Probe, ProbeReport, Subject
from torchport.timing import timed

PROBE_VERSION = 1
REPEATS = 5


def time_block_mask(subject: Subject) -> tuple[dict, dict]:
    """(metrics, facts) of building the case's BlockMask at its perf size on the device."""
    from torchport.execution.steps import place

    config = subject.config
    workload = subject.case.build(
        seed=config.seed, size=Size(perf=True, batch=config.batch, seq=config.seq)
    )
    model = place(workload, subject.device, subject.dtype).model
    facts = {
        "size": {k: workload.meta["flex"][k] for k in ("batch", "heads", "seq")},
        "repeats": REPEATS,
    }
    mask, first_s = timed(model.build_block_mask, subject.adapter.synchronize)
    if mask is None:
        facts["block_mask"] = "none: the variant has no mask_mod"
        return {}, facts
    times_s = [
        timed(model.build_block_mask, subject.adapter.synchronize)[1] for _ in range(REPEATS)
    ]
    facts["block_mask"] = {"shape": list(mask.shape), "block_size": list(mask.BLOCK_SIZE)}
    return {
        "flex_block_mask_build_ms": statistics.median(times_s) * 1e3,
        "flex_block_mask_build_first_ms": first_s * 1e3,
        "flex_block_sparsity_pct": float(mask.sparsity()),
    }, facts


def compare_with_sdpa(subject: Subject) -> tuple[dict, dict]:
    """(metrics, facts) of this mode's result against SDPA's, same device and dtype."""
    import torch

    from torchport.execution.steps import make_step, place, to_cpu

    sdpa = subject.workload.alternatives.get("sdpa")
    call = subject.workload.meta["flex"].get("sdpa")
    if sdpa is None:
        return {}, {"sdpa": "no equivalent SDPA call for this variant"}
    sdpa.eval()
    placed = place(dataclasses.replace(subject.workload, model=sdpa), subject.device, subject.dtype)
    ours = to_cpu(subject.step())
    theirs = to_cpu(make_step(placed.model, placed.model, placed)())
    tolerance = subject.workload.tolerance
    atol, rtol = (tolerance.atol, tolerance.rtol) if tolerance else subject.config.tolerance
    worst_abs, worst_rel, ok = 0.0, 0.0, True
    for name, theirs_t in theirs.items():
        a, b = ours[name].double(), theirs_t.double()
        diff = (a - b).abs().max().item()
        worst_abs = max(worst_abs, diff)
        worst_rel = max(worst_rel, diff / max(b.abs().max().item(), atol))
        ok = ok and torch.allclose(a, b, atol=atol, rtol=rtol)
    return (
        {"flex_sdpa_max_abs_err": worst_abs, "flex_sdpa_max_rel_err": worst_rel},
        {"sdpa": {"call": call, "ok": ok, "tensors": sorted(theirs), "atol": atol, "rtol": rtol}},
    )


class FlexProbe(Probe):
    name = "flex"
    version = PROBE_VERSION

    def applies(self, subject: Subject) -> bool:
        return "flex" in (subject.workload.meta or {})

    def run(self, subject: Subject) -> ProbeReport:
        report = ProbeReport()
        info = report.findings["flex"] = {"probe_version": PROBE_VERSION}
        for part in (time_block_mask, compare_with_sdpa):
            try:
                metrics, facts = part(subject)
            except Exception as exc:  # one part failing leaves the other's figures
                message = f"{part.__name__}: {type(exc).__name__}: {str(exc)[:300]}"
                info.setdefault("errors", []).append(message)
                report.error = report.error or {
                    "type": type(exc).__name__,
                    "message": message,
                    "probe": self.name,
                }
                continue
            report.metrics.update(metrics)
            info.update(facts)
        return report
