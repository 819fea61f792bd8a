"""Counts per status, with the denominator."""

from __future__ import annotations

from torchport.records import RESULT_STATUSES
from torchport.views.base import View, columns


def build(run: dict, results: list[dict]) -> View | None:
    counts = {s: 0 for s in RESULT_STATUSES}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    planned = len(run.get("plan") or results)
    rows = [[s, n] for s, n in counts.items() if n]
    notes = [f"{len(results)} / {planned} planned results recorded"]
    fallback_passes = sum(
        1 for r in results if r["status"] == "pass" and r.get("grade") == "fallback"
    )
    if fallback_passes:
        notes.append(f"{fallback_passes} pass results ran some ops on the host (grade fallback)")
    kernel_passes = sum(
        1 for r in results if r["status"] == "pass" and r.get("grade") == "host_kernel"
    )
    if kernel_passes:
        notes.append(
            f"{kernel_passes} pass results whose device kernels compute on the host (grade "
            "host_kernel: host work nested inside device kernels, no fallback)"
        )
    return View("Status counts", columns("status", ("results", "count")), rows, notes)
