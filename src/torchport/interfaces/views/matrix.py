"""Case x mode -> status and one key metric."""


ERROR_CHARS = 100


def trim_middle(text: str, limit: int = ERROR_CHARS) -> str:
    """Keep both ends: an error names the op at the start and the backend at the end
    ("Could not run 'aten::empty_strided' ... 'jax' backend")."""
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return f"{text[:head]} … {text[-(limit - 3 - head):]}"


def key_metric(result: dict) -> str:
    m = result.get("metrics") or {}
    weak = ((result.get("findings") or {}).get("reference") or {}).get("kind") == "float32"
    if "perf_median_ms" in m:
        return f"{m['perf_median_ms']:.3g} ms/step" + (", vs float32 ref" if weak else "")
    if result["status"] == "pass" and "parity_max_rel_err" in m:
        return f"rel err {m['parity_max_rel_err']:.1e}" + (" vs float32 ref" if weak else "")
    error = result.get("error") or {}
    lines = (error.get("message") or "").strip().splitlines()
    return trim_middle(first_sentence(lines[0])) if lines else ""


def first_sentence(text: str) -> str:
    """The first sentence, which in torch's errors names the op and the backend."""
    head, sep, _ = text.partition(". ")
    return head if sep and len(head) >= 20 else text


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
    notes = [f"{r['case']} ({r['mode']}): reference: {r['findings']['reference']['label']}"
             for r in results if ((r.get("findings") or {}).get("reference") or {}).get("kind")
             == "float32"]
    return {"title": "Results", "columns": ["case"] + modes, "rows": rows, "notes": notes}
