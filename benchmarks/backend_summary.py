"""One line per result of a knowledge base, with what issue 21 asks to see for a backend:
status, placement grade with host ops, scalar reads, compile outcome, reference kind, timing
method, and the backend's reading of a failure. Reads the SQLite file only (no torch). Every run
of the file, oldest first, unless ``--run`` names one.

    python benchmarks/backend_summary.py KB.db [--run RUN_ID] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402


def line(r: dict) -> str:
    f, m = r.get("findings") or {}, r.get("metrics") or {}
    parts = [
        f"{r['case']:<14} {r['mode']:<8} {r['status']}"
        + (f" @{r['stage']}" if r.get("stage") and r["status"] != "pass" else "")
    ]
    if r.get("grade"):
        host = ", ".join(
            f"{op.removeprefix('aten.').removesuffix('.default')} x{n}"
            for op, n in (f.get("fallback_ops") or {}).items()
        )
        parts.append(f"grade {r['grade']}" + (f" (host ops: {host})" if host else ""))
    reads = (f.get("placement_scalar_reads") or {}).get("ops")
    if reads:
        parts.append(
            "scalar reads (transfers): " + ", ".join(f"{k} x{v}" for k, v in reads.items())
        )
    instruments = f.get("placement_instruments") or {}
    not_ok = {
        name: i.get("error") or i.get("reason")
        for name, i in instruments.items()
        if i.get("status") != "ok" and name != "plain"
    }
    if not_ok:
        parts.append(
            "instruments: "
            + "; ".join(
                f"{n} {instruments[n]['status']} ({why[:120]})" for n, why in not_ok.items()
            )
        )
    added = (f.get("placement_observer_effect") or {}).get("added_by_recorders")
    if added:
        parts.append(
            "added by the recorders, not the step's: "
            + ", ".join(f"{k} x{v}" for k, v in added.items())
        )
    for err in f.get("probe_errors") or []:
        parts.append(f"probe {err.get('probe')} error: {(err.get('message') or '')[:160]}")
    if f.get("function_ops"):
        on_device = [row for row in f["function_ops"] if row["device"] not in ("cpu",)]
        if on_device:
            parts.append(
                "function-level: "
                + ", ".join(f"{row['op']} x{row['count']}" for row in on_device[:3])
            )
    outcome = f.get("compile_outcome")
    if outcome:
        parts.append(
            outcome.get("verdict") or f"graphs to backend: {outcome.get('graphs_to_backend')}"
        )
    ref = f.get("reference") or {}
    if ref:
        parts.append(f"reference: {ref.get('label')} ({ref.get('cache')})")
    if (f.get("placement_ties") or {}).get("retied"):
        parts.append(f["placement_ties"]["note"])
    perf = f.get("perf") or {}
    if "perf_median_ms" in m:
        speedup = f", speedup {m['perf_speedup']:.2f}x" if "perf_speedup" in m else ""
        parts.append(
            f"perf {m['perf_median_ms']:.3g} ms (CV {m.get('perf_cv', 0):.0%}"
            f"{speedup}), timer: {perf.get('timer')}"
        )
    elif f.get("sync_method"):
        parts.append(f"sync: {f['sync_method']}")
    if perf.get("peak_memory_unavailable"):
        parts.append(f"no peak memory: {perf['peak_memory_unavailable']}")
    det = f.get("determinism") or {}
    if det and not det.get("identical"):
        parts.append(f"two eager runs differ: max rel {det.get('max_rel_diff'):.2g}")
    if r["status"] != "pass" and r.get("error"):
        parts.append("error: " + (r["error"].get("message") or "").strip().splitlines()[0][:240])
    return "\n    ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--run", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from torchport.kb import open_store

    store = open_store(args.db, write=False)
    run_ids = [args.run] if args.run else [run["id"] for run in store.runs()][::-1]
    lines: list[str] = []
    for run_id in run_ids:
        run = store.get_run(run_id)
        env = (store.get_run(run["id"], plan=False, environments=True)["environments"] or [{}])[0]
        lines += [
            f"run {run_id} on {run['device']}: {run['command']}",
            f"torch {env.get('torch')}, backend packages {env.get('backend_packages')}",
            "",
        ] + [line(r) for r in store.results(run_id=run_id)]
        lines.append("")
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
