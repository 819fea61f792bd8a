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

from torchport.records.status import COMPILE_TIMEOUT, PASS
from torchport.views.base import Annotated, Span, View, columns

COLUMNS = columns(
    "variant",
    ("ran", "count"),
    ("passed", "count"),
    ("past limit", "count"),
    ("failed", "count"),
    ("skipped", "count"),
    ("first call s", "s"),
    ("first call range s", "s"),
    ("step ms", "ms"),
    ("vs SDPA", "ratio"),
    ("mask build ms", "ms"),
)


def family(case_id: str) -> str:
    return case_id.split("/")[1] if case_id.count("/") >= 2 else case_id


def tally(results: list[dict]) -> dict:
    """Counts of one mode's results: passed, past the compile limit, failed (by status), skipped
    (by reason)."""
    ran = [r for r in results if r["status"] != "skip"]
    failed = Counter(r["status"] for r in ran if r["status"] not in (PASS, COMPILE_TIMEOUT))
    reasons = Counter(
        ((r.get("error") or {}).get("message") or "no reason recorded")
        for r in results
        if r["status"] == "skip"
    )
    return {
        "ran": len(ran),
        "passed": sum(r["status"] == "pass" for r in ran),
        "timeout": sum(r["status"] == "compile_timeout" for r in ran),
        "failed": sum(failed.values()),
        "failed_by": failed,
        "skipped": sum(reasons.values()),
        "skip_reasons": reasons,
    }


def headline(mode: str, counts: dict, limit) -> str:
    """'compile: 24 of 26 passed, 1 past the compile limit (60 s), 1 failed; 26 skipped'."""
    limit_text = f"{limit:g} s" if limit else "none set"
    line = (
        f"{mode}: {counts['passed']} of {counts['ran']} passed, {counts['timeout']} past "
        f"the compile limit ({limit_text}), {counts['failed']} failed"
    )
    if counts["failed_by"]:
        line += " (" + ", ".join(f"{n} {s}" for s, n in counts["failed_by"].most_common()) + ")"
    return line + (f"; {counts['skipped']} skipped" if counts["skipped"] else "")


def _median(values) -> float | None:
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def first_call(results: list[dict], mode: str) -> tuple[float | None, Span | None]:
    """Median first-call seconds of the results that got through compiling, and their range."""
    stage = "compile_s" if mode == "compile" else "run_s"
    got_through = [
        r
        for r in results
        if r["status"] != "skip" and not (mode == "compile" and r.get("stage") == "compile")
    ]
    raw = [(r.get("durations") or {}).get(stage) for r in got_through]
    secs: list[float] = [s for s in raw if isinstance(s, (int, float))]
    if not secs:
        return None, None
    low, high = min(secs), max(secs)
    return statistics.median(secs), Span(low, high) if high - low >= 0.05 else None


def step_values(results: list[dict]) -> tuple[Span | float | None, float | None]:
    """(this mode's step ms, min-max over the family's cases; flex / SDPA, median ratio)."""
    raw = [(r.get("metrics") or {}).get("perf_median_ms") for r in results]
    steps: list[float] = [s for s in raw if isinstance(s, (int, float))]
    ratios = []
    for r in results:
        m = r.get("metrics") or {}
        if isinstance(m.get("perf_median_ms"), (int, float)) and m.get("perf_sdpa_median_ms"):
            ratios.append(m["perf_median_ms"] / m["perf_sdpa_median_ms"])
    step: Span | float | None = None
    if steps:
        step = steps[0] if len(steps) == 1 else Span(min(steps), max(steps))
    return step, statistics.median(ratios) if ratios else None


def family_row(name: str, results: list[dict], mode: str, limit) -> list:
    counts = tally(results)
    failed: int | Annotated = counts["failed"]
    if counts["failed_by"]:
        failed = Annotated(counts["failed"], ", ".join(sorted(counts["failed_by"])))
    step, vs_sdpa = step_values(results)
    mask = _median((r.get("metrics") or {}).get("flex_block_mask_build_ms") for r in results)
    median_s, span = first_call(results, mode)
    return [
        name,
        counts["ran"],
        counts["passed"],
        counts["timeout"],
        failed,
        counts["skipped"],
        median_s,
        span,
        step,
        vs_sdpa,
        mask,
    ]


def build(run: dict, results: list[dict]) -> View | None:
    flex = [r for r in results if r["case"].startswith("flex/")]
    if not flex:
        return None
    config = run.get("config") or {}
    limit = config.get("compile_timeout_s")
    modes = list(dict.fromkeys(m for _, m in run.get("plan") or [] if m)) or list(
        dict.fromkeys(r["mode"] for r in flex)
    )
    mode = "compile" if "compile" in modes else modes[0]
    chosen = [r for r in flex if r["mode"] == mode]
    by_family: dict[str, list[dict]] = {}
    for r in chosen:
        by_family.setdefault(family(r["case"]), []).append(r)
    rows = [family_row(name, rs, mode, limit) for name, rs in by_family.items()]
    rows.append(family_row("all", chosen, mode, limit))
    counts = {m: tally([r for r in flex if r["mode"] == m]) for m in modes}
    notes = [headline(m, counts[m], limit) for m in modes if m != mode]
    reasons: Counter[str] = Counter()
    for c in counts.values():
        reasons.update(c["skip_reasons"])
    notes += [f"skipped {n}: {reason}" for reason, n in reasons.most_common()]
    notes.append(
        f"rows: {mode} mode; first call: "
        + (
            "torch.compile + first compiled call (compile stage)"
            if mode == "compile"
            else "first eager call"
        )
        + ", median (min-max) over the variant's cases; "
        "step ms: perf size, min-max over cases; vs SDPA: step time / SDPA's where an "
        "equivalent SDPA call exists (median); mask build: BlockMask at perf size"
    )
    if mode == "compile":
        notes.append(
            "the first compiled case in a worker process also waits for the compiler "
            "to load (dynamo, Inductor): a cost every new process meets once"
        )
    planned = sum(1 for case, _ in run.get("plan") or [] if case.startswith("flex/"))
    if planned > len(flex):
        notes.append(f"{planned - len(flex)} planned flex results not recorded (interrupted?)")
    title = f"FlexAttention ({config.get('dtype', '?')}): " + headline(mode, counts[mode], limit)
    return View(title, COLUMNS, rows, notes)
