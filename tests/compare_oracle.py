"""The Python oracle of a comparison: two result streams walked side by side and each pair
decided by the Python predicates made from the declared rules (records/figures.py). The store's
one read (``store.compare``, kb/reads/compare.py) decides in SQL; the tests hold its
answer, formatted by views/compare.py ``compare_runs``, equal to this walk's on random runs
(tests/views/test_compare.py). Not a path of the tool: a test's yardstick.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from torchport.kb.sql_common import host_ops_text
from torchport.records.figures import FIGURE_RULES, PLACEMENT_RULE, STATUS_RULES, STEP_TIME
from torchport.views.compare import (
    LINES,
    PLACEMENT,
    VERDICTS_COUNTED,
    WITHIN,
    Comparison,
    _count,
    _host_ops,
    _remarks,
    _show,
    environment_diff,
    metrics,
    run_brief,
)
from torchport.views.compare_dist import dist_changes
from torchport.views.compare_placement import new_counts, summarize, tally
from torchport.views.noise import step_verdict
from torchport.views.op_coverage import coverage, diff, slim


def paired(
    results_a: Iterable[dict], results_b: Iterable[dict]
) -> Iterator[tuple[tuple[str, str], dict | None, dict | None]]:
    """Walk two result streams sorted by (case, mode) side by side (a merge join)."""
    it_a, it_b = iter(results_a), iter(results_b)
    a, b = next(it_a, None), next(it_b, None)
    while a is not None or b is not None:
        ka = (a["case"], a["mode"]) if a is not None else None
        kb = (b["case"], b["mode"]) if b is not None else None
        if kb is None or (ka is not None and ka < kb):
            yield ka, a, None  # type: ignore[misc]
            a = next(it_a, None)
        elif ka is None or kb < ka:
            yield kb, None, b
            b = next(it_b, None)
        else:
            yield ka, a, b
            a, b = next(it_a, None), next(it_b, None)


def host_ops_key(result: dict) -> str | None:
    """The host-op table as the store holds it (the ``host_ops`` column's text,
    kb/sql_common.py ``host_ops_text``): what the placement rule compares, from an
    outcome row's cell or from a result's findings."""
    if "host_ops" not in result:
        return host_ops_text(result.get("findings") or {})
    ops = result["host_ops"]
    return json.dumps(ops, sort_keys=True, separators=(",", ":"), default=str) if ops else None


def both_timed(a: dict, b: dict) -> bool:
    """A step time is comparable only when both runs ran the whole ladder and timed it."""
    return a["status"] == b["status"] == "pass" and STEP_TIME.timed(
        metrics(a).get("perf_median_ms"), metrics(b).get("perf_median_ms")
    )


def decide(a: dict, b: dict) -> frozenset[str]:
    """What holds of one pair, decided in Python from the declared rules: the names the
    store's SQL decides (kb/queries.py decided_names; a timed pair within the noise
    says WITHIN). tests/views/test_compare.py holds the two equal on random runs."""
    statuses = (a["status"], a.get("stage"), b["status"], b.get("stage"))
    holds = {rule.name for rule in STATUS_RULES if rule.holds(*statuses)}
    if a.get("grade") is not None and b.get("grade") is not None:  # (the keys read only then)
        if PLACEMENT_RULE.holds(a["grade"], host_ops_key(a), b["grade"], host_ops_key(b)):
            holds.add(PLACEMENT)
    ma, mb = metrics(a), metrics(b)
    holds.update(
        rule.figure
        for rule in FIGURE_RULES
        if rule.past(ma.get(rule.figure), mb.get(rule.figure), LINES[rule.option])
    )
    if both_timed(a, b):
        holds.add(step_verdict(ma, mb) or WITHIN)
    return frozenset(holds)


def _tally(out: Comparison, decided: frozenset[str]) -> None:
    """Count a pair's step-time verdict (WITHIN only where the decider names it)."""
    for verdict in (*VERDICTS_COUNTED, WITHIN):
        if verdict in decided:
            out.perf_verdicts[verdict] = out.perf_verdicts.get(verdict, 0) + 1


def compare(
    run_a: dict,
    results_a: Iterable[dict],
    run_b: dict,
    results_b: Iterable[dict],
    *,
    env_a: dict | None = None,
    env_b: dict | None = None,
    notes: list[dict] | None = None,
) -> Comparison:
    """``results_*`` sorted by (case, mode): results or outcome rows
    (``store.statuses(run_id, outcomes=True)``)."""
    out = Comparison(
        run_a=run_brief(run_a),
        run_b=run_brief(run_b),
        environment=environment_diff(env_a or {}, env_b or {}),
        notes=list(notes or []),
    )
    plan_a = {tuple(item) for item in run_a.get("plan") or []}
    plan_b = {tuple(item) for item in run_b.get("plan") or []}
    placed_a, placed_b = new_counts(), new_counts()
    dist_a: list[dict] = []
    dist_b: list[dict] = []
    ops_a: list[dict] = []
    ops_b: list[dict] = []
    for key, a, b in paired(results_a, results_b):
        case, mode = key
        ops_a += [s] if a is not None and (s := slim(a)) is not None else []
        ops_b += [s] if b is not None and (s := slim(b)) is not None else []
        dist_a += [a] if a is not None and case.startswith("dist/") else []
        dist_b += [b] if b is not None and case.startswith("dist/") else []
        for side, r in ((placed_a, a), (placed_b, b)):
            if r is not None:
                tally(side, r.get("grade"), *_host_ops(r))
        if b is None:
            out.only_a.append([case, mode])
            out.unrecorded_b += key in plan_b
            continue
        if a is None:
            out.only_b.append([case, mode])
            out.unrecorded_a += key in plan_a
            continue
        out.common += 1
        _count(out, a["status"], b["status"])
        decided = decide(a, b)
        _show(out, a, b, decided)
        _tally(out, decided)
    out.remarks = _remarks(out, run_a, run_b)
    out.placement_summary = summarize(run_a, run_b, placed_a, placed_b)
    out.remarks += out.placement_summary["remarks"]
    out.dist = dist_changes(dist_a, dist_b)
    out.coverage = diff(coverage(run_a, ops_a), coverage(run_b, ops_b))
    return out
