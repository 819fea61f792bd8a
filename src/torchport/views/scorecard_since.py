"""The scorecard's "since the last evaluation of this device?": each part compared with the same
part of the device's previous evaluation (views/compare.py: new failures, fixes, step times
beyond the noise) and the two compatibility tables diffed (fallbacks gone or new)."""

from __future__ import annotations

from torchport.views.compat import HOST, NATIVE, NOT_REACHED, CompatRow, compat_diff, compat_table
from torchport.views.evaluation import DEVICE_SIDE, Group, load_group, previous_evaluation
from torchport.views.headline import BAD, GOOD, NONE, WARN
from torchport.views.noise import FASTER, SLOWER
from torchport.views.scorecard_answers import Answer, Reader, more, unfit_timing


def _step(change) -> str:
    return (
        f"{change.case} [{change.mode}] step {change.before_ms:.3g} -> {change.after_ms:.3g} ms "
        f"(x{change.ratio:.2f})"
    )


def since(
    store, reader: Reader, group: Group, compat: list[CompatRow]
) -> tuple[Answer, str | None]:
    from torchport.views.compare import compare_runs

    question = "since the last evaluation of this device?"
    previous = previous_evaluation(store, group)
    if previous is None:
        return Answer(
            question, "first evaluation of this device in this knowledge base", NONE
        ), None
    before = load_group(store, previous)
    earlier = Reader(store, before)
    new_fail: list[str] = []
    fixed: list[str] = []
    slower: list[str] = []
    faster: list[str] = []
    evidence: list[dict] = []
    unjudged: list[str] = []
    for part in reader.device_parts():
        a, b = before.run_of(part), group.run_of(part)
        if a is None or b is None:
            continue
        cmp = compare_runs(store, a["id"], b["id"])
        new_fail += [
            f"{e['case']} [{e['mode']}] {e.get('after') or ''}".strip() for e in cmp.newly_failing
        ]
        new_fail += [
            f"{e['case']} [{e['mode']}] {e.get('after') or ''}".strip()
            for e in cmp.failure_changed
            if e.get("after") and e.get("after") != "pass"
        ]
        fixed += [f"{e['case']} [{e['mode']}]" for e in cmp.newly_passing]
        # Two evaluations' runs are minutes or days apart: a step time taken noisy or on an
        # oversubscribed host decides no change (its run's own spread cannot cover the load).
        unfit = {
            (r["case"], r["mode"]): why
            for r in earlier.of(part) + reader.of(part)
            if (why := unfit_timing(r))
        }
        for change in cmp.perf:
            if change.verdict not in (SLOWER, FASTER):
                continue
            if (change.case, change.mode) in unfit:
                unjudged.append(unfit[(change.case, change.mode)])
                continue
            # ratio: this evaluation's step time over the last one's (below 1: faster)
            (slower if change.verdict == SLOWER else faster).append(_step(change))
        evidence.append({"run": a["id"], "part": part, "side": "previous", "view": "compare"})
        evidence.append({"run": b["id"], "part": part, "side": DEVICE_SIDE, "view": "compare"})
    old_compat = compat_table(Reader(store, before).results_by_side(DEVICE_SIDE), before.plan)
    changes = compat_diff(old_compat, compat)
    # Only an op seen both times changes: one the last evaluation did not reach is first seen.
    gone = [c["op"] for c in changes if (c["before"], c["after"]) == (HOST, NATIVE)]
    new_host = [c["op"] for c in changes if (c["before"], c["after"]) == (NATIVE, HOST)]
    first_seen = sum(c["before"] in (None, NOT_REACHED) and c["after"] != NOT_REACHED
                     for c in changes)  # fmt: skip
    listed = (
        ("new failures", new_fail),
        ("fixed", fixed),
        ("new host fallbacks", new_host),
        ("fallbacks gone", gone),
    )
    parts = [f"{what}: {more(names)}" for what, names in listed if names]
    if first_seen:
        parts.append(f"{first_seen} ops seen for the first time")
    speeds = (("slower beyond noise", slower), ("faster beyond noise", faster))
    parts += [f"{what}: {more(names)}" for what, names in speeds if names]
    if unjudged:
        parts.append(f"{len(unjudged)} step-time changes not judged: {more(sorted(set(unjudged)))}")
    tone = BAD if new_fail else WARN if (slower or new_host) else GOOD
    answer = f"against {previous}: " + (
        "; ".join(parts) if parts else "no change beyond noise in the parts both ran"
    )
    return (
        Answer(
            question,
            answer,
            tone,
            evidence,
            {
                "previous": previous,
                "new_failures": new_fail,
                "fixed": fixed,
                "new_host_fallbacks": new_host,
                "fallbacks_gone": gone,
                "ops_first_seen": first_seen,
                "slower": slower,
                "faster": faster,
            },
        ),
        previous,
    )
