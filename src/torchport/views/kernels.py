"""Kernel replacements: each one's verdict with its reason and figures, and the fast_p summary.

fast_p (after KernelBench): of the kernels tried (one per case and mode), the share that are
correct (status pass: opcheck, gradcheck, samples and the whole-model A/B all agree) AND make
the whole training step faster (``kernel_step_speedup`` > p, p = 1 here), with the geometric
mean speedup of those. A kernel whose step timing is noisy is still counted, and flagged.
"""

from __future__ import annotations

import math

from torchport.views.base import View, columns, of_ladder

COLUMNS = columns(
    "case",
    "mode",
    "status",
    "verdict",
    ("step speedup", "ratio"),
    ("op speedup", "ratio"),
    ("breaks added", "int"),
    ("recompiles added", "int"),
    "reason",
)
FAST_COLUMNS = columns(
    "mode",
    ("tried", "count"),
    ("correct", "count"),
    ("correct and faster", "count"),
    ("fast_p", "percent"),
    ("geomean speedup of those", "ratio"),
    ("geomean speedup of correct", "ratio"),
    ("correct, timing noisy", "count"),
)


def kernel_results(results: list[dict]) -> list[dict]:
    """Kernel tasks' results, crashed and timed-out ones included (``of_ladder``)."""
    return [r for r in results if of_ladder(r, "kernel")]


def _verdict(result: dict) -> str | None:
    return ((result.get("findings") or {}).get("kernel") or {}).get("verdict")


def _noisy(result: dict) -> bool:
    """The ladder could not tell the sides' step times apart (``correct_noisy_timing``)."""
    kernel = (result.get("findings") or {}).get("kernel") or {}
    return kernel.get("verdict") == "correct_noisy_timing"


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def fast_p(results: list[dict], p: float = 1.0) -> list[list]:
    """One row per mode: tried, correct, correct and faster than ``p``, fast_p, geomeans."""
    rows = []
    for mode in sorted({r["mode"] for r in results}):
        tried = [r for r in results if r["mode"] == mode]
        correct = [r for r in tried if r.get("status") == "pass"]
        speed = [(r.get("metrics") or {}).get("kernel_step_speedup") for r in correct]
        # faster: above p, and the ladder's verdict says so (a gap beyond the noise of its own
        # timing and past the minimum size: runner/kernels/ladder.py)
        faster = [
            s
            for r, s in zip(correct, speed, strict=True)
            if isinstance(s, (int, float)) and s > p and _verdict(r) == "correct_faster"
        ]
        noisy = sum(1 for r in correct if _noisy(r))
        rows.append(
            [
                mode,
                len(tried),
                len(correct),
                len(faster),
                len(faster) / len(tried) if tried else None,
                _geomean(faster),
                _geomean([s for s in speed if isinstance(s, (int, float))]),
                noisy,
            ]
        )
    return rows


def build(run: dict, results: list[dict]) -> View | None:
    tried = kernel_results(results)
    if not tried:
        return None
    rows: list[list] = []
    notes: list[str] = []
    for r in tried:
        m = r.get("metrics") or {}
        k = (r.get("findings") or {}).get("kernel") or {}
        rows.append(
            [
                r["case"],
                r["mode"],
                r.get("status"),
                k.get("verdict"),
                m.get("kernel_step_speedup"),
                m.get("kernel_op_speedup"),
                m.get("kernel_graph_breaks_added"),
                m.get("kernel_recompiles_added"),
                k.get("reason") or (r.get("error") or {}).get("message"),
            ]
        )
    notes.insert(
        0,
        "speedup = original median / replaced median (above 1: faster); the reference of "
        "every check runs the ORIGINAL module",
    )
    return View("Kernel replacements", COLUMNS, rows, notes)


def summary(run: dict, results: list[dict]) -> View | None:
    tried = kernel_results(results)
    if not tried:
        return None
    return View(
        "Kernels: fast_p (correct and faster end to end)",
        FAST_COLUMNS,
        fast_p(tried),
        [
            "tried: kernel cases in this run (per mode), crashed and timed-out tasks included; "
            "correct: status pass; faster: whole training step median below the original's "
            "(kernel_step_speedup > 1) by a gap beyond the timing's noise and at least 5 % "
            "(verdict correct_faster; a noisy one is counted in the last column, not as faster)"
        ],
    )
