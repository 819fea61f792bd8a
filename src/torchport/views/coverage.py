"""Coverage: how many cases passed each stage, with the denominator, overall and per tag.

"146 / 196 architectures" style. The denominator is every case in the run's plan, skips
included: nothing is dropped from it silently.
"""

from __future__ import annotations

from torchport.views.base import Column, Fraction, View

LADDER = ("build", "place", "run", "compile", "compiled_run", "reference", "parity")
# A crash or timeout whose stage is a probe happened after the whole ladder.
COLUMNS = (
    ("build", "build", None),
    ("eager", "run", "eager"),
    ("compile", "compiled_run", "compile"),
    ("parity", "parity", None),
)


def weak_reference(result: dict) -> bool:
    """Judged against the float32 CPU run because float64 failed (a weaker verdict)."""
    return ((result.get("findings") or {}).get("reference") or {}).get("kind") == "float32"


def passed_stage(result: dict, stage: str) -> bool:
    """Did ``result`` get through ``stage``? A failure at a later stage means it did.
    A parity pass against the weaker float32 reference is counted apart, not here."""
    if stage == "parity" and weak_reference(result):
        return False
    if result["status"] == "pass":
        return True
    if result["status"] == "skip":
        return False
    failed_at = result.get("stage")
    if failed_at not in LADDER:
        return failed_at is not None and failed_at.startswith(("probe:", "train"))
    return LADDER.index(failed_at) > LADDER.index(stage)


def case_passed(results: list[dict], stage: str, mode: str | None) -> bool:
    chosen = [r for r in results if mode is None or r["mode"] == mode]
    return bool(chosen) and all(passed_stage(r, stage) for r in chosen)


def _row(label: str, by_case: dict[str, list[dict]], modes: set[str]) -> list:
    total = len(by_case)
    row: list = [label, total]
    for _, stage, mode in COLUMNS:
        if mode is not None and mode not in modes or not total:
            row.append(None)
            continue
        row.append(Fraction(sum(case_passed(rs, stage, mode) for rs in by_case.values()), total))
    return row


def build(run: dict, results: list[dict]) -> View | None:
    plan_cases = list(dict.fromkeys(case for case, _ in run.get("plan") or []))
    if len(plan_cases) < 2:
        return None
    by_case: dict[str, list[dict]] = {case: [] for case in plan_cases}
    tags: dict[str, set[str]] = {case: set() for case in plan_cases}
    for r in results:
        by_case.setdefault(r["case"], []).append(r)
        tags.setdefault(r["case"], set()).update((r.get("findings") or {}).get("tags") or ())
    modes = {m for _, m in run.get("plan") or []}
    rows = [_row("all", by_case, modes)]
    for tag in sorted({t for ts in tags.values() for t in ts}):
        rows.append(_row(tag, {c: rs for c, rs in by_case.items() if tag in tags[c]}, modes))
    missing = sum(1 for rs in by_case.values() if not rs)
    notes = [
        f"denominator: {len(by_case)} cases in the plan; a case counts for a stage when "
        "every result of the named mode got through it"
    ]
    if missing:
        notes.append(f"{missing} cases have no result yet (interrupted run?)")
    weak = sum(1 for rs in by_case.values() if rs and any(weak_reference(r) for r in rs))
    weak_pass = sum(
        1
        for rs in by_case.values()
        if rs and all(weak_reference(r) and r["status"] == "pass" for r in rs)
    )
    if weak:
        notes.append(
            f"{weak} cases were judged against the float32 CPU run because their "
            f"float64 reference failed; {weak_pass} passed on that weaker reference "
            "(counted apart: not in the parity column)"
        )
    reference_failed = sum(
        1 for rs in by_case.values() if any(r.get("stage") == "reference" for r in rs)
    )
    if reference_failed:
        notes.append(
            f"{reference_failed} cases ran on the device but their CPU float64 "
            "reference failed (build_fail @reference): counted through eager, not parity"
        )
    skipped = sum(1 for rs in by_case.values() if rs and all(r["status"] == "skip" for r in rs))
    if skipped:
        notes.append(f"{skipped} cases skipped with a recorded reason")
    cols = (Column("cases"), Column("n", "count")) + tuple(
        Column(c, "count") for c, _, _ in COLUMNS
    )
    return View("Coverage by stage", cols, rows, notes)
