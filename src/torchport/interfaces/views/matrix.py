"""Case x mode -> status and one key metric."""


def key_metric(result: dict) -> str:
    m = result.get("metrics") or {}
    if "perf_median_ms" in m:
        return f"{m['perf_median_ms']:.3g} ms/step"
    if result["status"] == "pass" and "parity_max_rel_err" in m:
        return f"rel err {m['parity_max_rel_err']:.1e}"
    error = result.get("error") or {}
    return (error.get("message") or "").splitlines()[0][:60] if error else ""


def cell(result: dict) -> str:
    status = result["status"]
    if result.get("grade") and result["grade"] != "on_device":
        status += f" [{result['grade']}]"
    if result.get("stage") and status not in ("pass", "skip"):
        status += f" @{result['stage']}"
    metric = key_metric(result)
    return f"{status} ({metric})" if metric else status


def build(run, results):
    modes = list(dict.fromkeys((run.get("config") or {}).get("modes") or
                               [r["mode"] for r in results]))
    by_case: dict[str, dict] = {}
    for r in results:
        by_case.setdefault(r["case"], {})[r["mode"]] = r
    rows = [[case] + [cell(row[m]) if m in row else "-" for m in modes]
            for case, row in by_case.items()]
    return {"title": "Results", "columns": ["case"] + modes, "rows": rows, "notes": []}
