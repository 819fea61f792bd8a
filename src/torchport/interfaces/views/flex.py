"""FlexAttention summary, read like the published figure: "X of Y passed, Z past the compile
limit, W failed", per variant family (the second part of a ``flex/<variant>/...`` id), with
each family's first-call time: the ladder's compile stage, torch.compile plus the first
compiled call (in eager mode, the first eager call).

Y counts the results that ran; skips are counted apart, with their reasons. Step times come
from the perf probe, mask build times from the flex probe; never imports torch.
"""

from __future__ import annotations

import statistics
from collections import Counter

COLUMNS = ["variant", "ran", "passed", "past limit", "failed", "skipped", "first call s",
           "step ms", "vs SDPA", "mask build ms"]


def family(case_id: str) -> str:
    return case_id.split("/")[1] if case_id.count("/") >= 2 else case_id


def tally(results: list[dict]) -> dict:
    """Counts of one mode's results: passed, past the compile limit, failed (by status), skipped
    (by reason)."""
    ran = [r for r in results if r["status"] != "skip"]
    failed = Counter(r["status"] for r in ran if r["status"] not in ("pass", "compile_timeout"))
    reasons = Counter(((r.get("error") or {}).get("message") or "no reason recorded")
                      for r in results if r["status"] == "skip")
    return {"ran": len(ran), "passed": sum(r["status"] == "pass" for r in ran),
            "timeout": sum(r["status"] == "compile_timeout" for r in ran),
            "failed": sum(failed.values()), "failed_by": failed,
            "skipped": sum(reasons.values()), "skip_reasons": reasons}


def headline(mode: str, counts: dict, limit) -> str:
    """'compile: 24 of 26 passed, 1 past the compile limit (60 s), 1 failed; 26 skipped'."""
    limit_text = f"{limit:g} s" if limit else "none set"
    line = (f"{mode}: {counts['passed']} of {counts['ran']} passed, {counts['timeout']} past "
            f"the compile limit ({limit_text}), {counts['failed']} failed")
    if counts["failed_by"]:
        line += " (" + ", ".join(f"{n} {s}" for s, n in counts["failed_by"].most_common()) + ")"
    return line + (f"; {counts['skipped']} skipped" if counts["skipped"] else "")


def _median(values) -> float | None:
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def first_call_cell(results: list[dict], mode: str, limit) -> str:
    stage = "compile_s" if mode == "compile" else "run_s"
    got_through = [r for r in results if r["status"] != "skip" and not (
        mode == "compile" and r.get("stage") == "compile")]
    secs = [(r.get("durations") or {}).get(stage) for r in got_through]
    secs = [s for s in secs if isinstance(s, (int, float))]
    parts = []
    if secs:
        low, high = min(secs), max(secs)
        parts.append(f"{statistics.median(secs):.1f}" + (f" ({low:.1f}-{high:.1f})"
                                                         if high - low >= 0.05 else ""))
    timeouts = sum(r["status"] == "compile_timeout" for r in results)
    if timeouts:
        parts.append(f"{timeouts} > {limit:g}" if limit else f"{timeouts} timed out")
    return "; ".join(parts) or "-"


def step_cells(results: list[dict]) -> tuple[str, str]:
    """(this mode's step ms, min-max over the family's cases; flex / SDPA, median ratio)."""
    steps = [(r.get("metrics") or {}).get("perf_median_ms") for r in results]
    steps = [s for s in steps if isinstance(s, (int, float))]
    ratios = []
    for r in results:
        m = r.get("metrics") or {}
        if isinstance(m.get("perf_median_ms"), (int, float)) and m.get("perf_sdpa_median_ms"):
            ratios.append(m["perf_median_ms"] / m["perf_sdpa_median_ms"])
    low, high = (f"{min(steps):.3g}", f"{max(steps):.3g}") if steps else ("-", "-")
    step = low if low == high else f"{low}-{high}"
    return step, f"{statistics.median(ratios):.2f}x" if ratios else "-"


def family_row(name: str, results: list[dict], mode: str, limit) -> list:
    counts = tally(results)
    failed = str(counts["failed"])
    if counts["failed_by"]:
        failed += " (" + ", ".join(sorted(counts["failed_by"])) + ")"
    step, vs_sdpa = step_cells(results)
    mask = _median((r.get("metrics") or {}).get("flex_block_mask_build_ms") for r in results)
    return [name, counts["ran"], counts["passed"], counts["timeout"], failed, counts["skipped"],
            first_call_cell(results, mode, limit), step, vs_sdpa,
            "-" if mask is None else f"{mask:.3g}"]


def build(run, results):
    flex = [r for r in results if r["case"].startswith("flex/")]
    if not flex:
        return None
    config = run.get("config") or {}
    limit = config.get("compile_timeout_s")
    modes = list(dict.fromkeys(m for _, m in run.get("plan") or [] if m)) or \
        list(dict.fromkeys(r["mode"] for r in flex))
    mode = "compile" if "compile" in modes else modes[0]
    chosen = [r for r in flex if r["mode"] == mode]
    by_family: dict[str, list[dict]] = {}
    for r in chosen:
        by_family.setdefault(family(r["case"]), []).append(r)
    rows = [family_row(name, rs, mode, limit) for name, rs in by_family.items()]
    rows.append(family_row("all", chosen, mode, limit))
    counts = {m: tally([r for r in flex if r["mode"] == m]) for m in modes}
    notes = [headline(m, counts[m], limit) for m in modes if m != mode]
    reasons = Counter()
    for c in counts.values():
        reasons.update(c["skip_reasons"])
    notes += [f"skipped {n}: {reason}" for reason, n in reasons.most_common()]
    notes.append(f"rows: {mode} mode; first call: "
                 + ("torch.compile + first compiled call (compile stage)" if mode == "compile"
                    else "first eager call") + ", median (min-max) over the variant's cases; "
                 "step ms: perf size, min-max over cases; vs SDPA: step time / SDPA's where an "
                 "equivalent SDPA call exists (median); mask build: BlockMask at perf size")
    if mode == "compile":
        notes.append("the first compiled case in a worker process also waits for the compiler "
                     "to load (dynamo, Inductor): a cost every new process meets once")
    planned = sum(1 for case, _ in run.get("plan") or [] if case.startswith("flex/"))
    if planned > len(flex):
        notes.append(f"{planned - len(flex)} planned flex results not recorded (interrupted?)")
    title = f"FlexAttention ({config.get('dtype', '?')}): " + headline(mode, counts[mode], limit)
    return {"title": title, "columns": COLUMNS, "rows": rows, "notes": notes}
