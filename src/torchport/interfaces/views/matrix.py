"""Case x mode -> status and one key metric."""


def parity_failure(result: dict) -> str | None:
    """For a parity failure: how many tensors failed and the worst, with its error and ratio."""
    parity = (result.get("findings") or {}).get("parity") or {}
    if result["status"] != "accuracy_fail" or result.get("stage") != "parity" or \
            not parity.get("failing"):
        return None
    text = f"{parity['failing']} / {parity['tensors'] + len(parity.get('missing') or [])} " \
           "tensors failed"
    worst = (parity.get("worst") or [None])[0]
    if worst:
        text += f"; worst {worst['name']} rel err {worst['max_rel_err'] or float('inf'):.1e}"
        if worst.get("excess") is not None:
            text += f", {worst['excess']:.3g}x allowed"
    return text


def key_metric(result: dict) -> str:
    m = result.get("metrics") or {}
    failed = parity_failure(result)
    if failed:
        return failed
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
    return {"title": "Results", "columns": ["case"] + modes, "rows": rows,
            "notes": step_notes(results) + compile_notes(results)}


def step_notes(results) -> list[str]:
    """What a step was and the mode it ran in (train / eval), with how dropout was matched."""
    kinds: dict[str, int] = {}
    masked = []
    for r in results:
        step = (r.get("findings") or {}).get("step")
        if step:
            key = f"{step['kind']} in {step['mode']} mode"
            kinds[key] = kinds.get(key, 0) + 1
            if (step.get("randomness") or {}).get("masked_dropout_calls") and \
                    r["case"] not in masked:
                masked.append(r["case"])
    notes = ["steps: " + ", ".join(f"{k} ({n})" for k, n in kinds.items())] if kinds else []
    if masked:
        notes.append("dropout masks drawn on the CPU and applied identically on every side: "
                     + ", ".join(masked))
    return notes


def compile_notes(results) -> list[str]:
    """Which torch.compile backend compile mode used, and why."""
    chosen = {(c["name"], c["reason"]) for r in results
              if (c := (r.get("findings") or {}).get("compile_backend"))}
    return [f"compile backend {name}: {reason}" for name, reason in sorted(chosen)]
