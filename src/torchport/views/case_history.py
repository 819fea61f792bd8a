"""One case across runs, devices and releases: its outcome in each run, the figures a reader
plots (step time, cold and warm compile), the parity figures per tensor and the latest failure.

The results come from ``store.results(case_glob=exact_glob(case))`` (an indexed lookup), the
runs from ``store.runs()``; nothing here reads a connection.
"""

from __future__ import annotations

import glob

from torchport.records.status import NOT_FAILURES
from torchport.views.base import Span, View, columns, outcome

HISTORY_COLUMNS = columns(
    "run",
    "started",
    "device",
    ("labels", "labels"),
    "mode",
    ("outcome", "outcome"),
    ("step ms", "ms"),
    ("p10-p90 ms", "ms"),
    ("cold compile", "s"),
    ("warm compile", "s"),
    ("max rel err", "sci"),
)
TENSOR_COLUMNS = columns(
    "tensor",
    ("max abs err", "sci"),
    ("max rel err", "sci"),
    ("RMSE", "sci"),
    ("allowed RMSE", "sci"),
    ("x CPU error", "ratio"),
    ("x allowed", "ratio"),
)


def exact_glob(case: str) -> str:
    """A glob that matches ``case`` and nothing else (``[``, ``*``, ``?`` taken literally)."""
    return glob.escape(case)


def history_view(case: str, results: list[dict], runs: dict[str, dict]) -> View:
    """``results`` of ``case`` oldest first; ``runs`` by id (for device, labels, start)."""
    rows = []
    for r in results:
        run = runs.get(r["run_id"]) or {}
        m = r.get("metrics") or {}
        spread = (
            Span(m["perf_p10_ms"], m["perf_p90_ms"])
            if "perf_p10_ms" in m and "perf_p90_ms" in m
            else None
        )
        rows.append(
            [
                r["run_id"],
                run.get("started_at"),
                run.get("device"),
                run.get("labels") or {},
                r["mode"],
                outcome(r),
                m.get("perf_median_ms"),
                spread,
                m.get("compile_cold_first_step_s"),
                m.get("compile_warm_first_step_s"),
                m.get("parity_max_rel_err"),
            ]
        )
    devices = sorted({str(row[2]) for row in rows if row[2]})
    notes = [
        f"{len(rows)} results of {case} in {len({r['run_id'] for r in results})} runs "
        f"on {', '.join(devices) or 'no recorded device'}, oldest first"
    ]
    return View(f"History of {case}", HISTORY_COLUMNS, rows, notes)


def parity_view(result: dict) -> View | None:
    """Parity per tensor of one result: the failing tensors the probe recorded, worst first,
    with the figures of the whole comparison in the notes."""
    parity = (result.get("findings") or {}).get("parity")
    m = result.get("metrics") or {}
    if not isinstance(parity, dict) and "parity_max_rel_err" not in m:
        return None
    parity = parity if isinstance(parity, dict) else {}
    rows = [
        [
            t.get("name"),
            t.get("max_abs_err"),
            t.get("max_rel_err"),
            t.get("rmse"),
            t.get("allowed_rmse"),
            t.get("rmse_ratio"),
            t.get("excess"),
        ]
        for t in parity.get("worst") or ()
        if isinstance(t, dict)
    ]
    notes = [
        f"run {result['run_id']} [{result['mode']}]: "
        + ", ".join(
            f"{name.removeprefix('parity_')} {m[name]:.3g}"
            for name in (
                "parity_max_abs_err",
                "parity_max_rel_err",
                "parity_rmse_ratio",
                "parity_cosine",
            )
            if isinstance(m.get(name), (int, float))
        )
    ]
    if parity:
        notes.append(
            f"{parity.get('failing', 0)} / {parity.get('tensors', '?')} tensors outside "
            f"tolerance against the {parity.get('basis')} basis ({parity.get('dtype')}); "
            "figures per tensor are recorded for the failing ones, worst first"
        )
    if parity.get("missing"):
        notes.append("missing from the result: " + ", ".join(map(str, parity["missing"])))
    return View("Parity per tensor", TENSOR_COLUMNS, rows, notes)


def latest_failure(results: list[dict]) -> dict | None:
    """The newest result that failed with an error (its traceback is shown whole)."""
    for r in reversed(results):
        if r["status"] not in NOT_FAILURES and r.get("error"):
            return r
    return None
