"""Compare two runs: only the (case, mode) pairs recorded in both, every figure with its test.

What changed between two runs of a suite, across devices (cuda vs neuron) or across releases
(one device, two environments): the environment difference first, then status transitions (a
matrix and lists), placement changes per host op, parity drift, step-time changes beyond the
measured noise (views/noise.py), compile-time changes past PyTorch HUD's 1.15x line, and peak
memory. Interrupted runs compare on what they recorded; the denominators say so.

One path: each pair's decisions (which lists it shows in: the status lists, the placement
candidate, each FigureRule of records/figures.py past its line, the step-time verdict) are
made from the declared rules, and ``_show`` only formats a pair into the lists its decisions
name. ``compare_runs`` has the store decide, in SQL made from those rules (records/queries.py
``decisions``): every pair that may have changed, or each list's first pairs and every list's
count (a page); two runs of 100 000 results never sit in memory, and most pairs never leave
the database. ``compare`` walks two result streams in (case, mode) order side by side and
decides each pair with the Python predicates made from the same rules (``decide``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from torchport.records import forked
from torchport.records.figures import (
    COMPILE_FIGURES,
    FIGURE_RULES,
    PARITY_FIGURES,
    PLACEMENT_RULE,
    STATUS_RULES,
)
from torchport.records.sql_common import HOST_OP_CLASSES, host_op_classes, host_ops_text
from torchport.views.compare_dist import dist_changes, dist_summary
from torchport.views.compare_placement import new_counts, placement_summary, summarize, tally
from torchport.views.noise import (
    FASTER,
    MIN_CHANGE,
    MIN_SAMPLES,
    NOT_JUDGED,
    SLOWER,
    WITHIN,
    change,
    step_verdict,
)
from torchport.views.op_coverage import coverage, coverage_summary, diff, slim

# Each figure's rule and line is declared once, in records/figures.py FIGURE_RULES.
_DEFAULTS = {rule.option: rule.default for rule in FIGURE_RULES}
COMPILE_RATIO = _DEFAULTS["compile_ratio"]  # PyTorch HUD flags compile time above 1.15x
PARITY_FACTOR = _DEFAULTS["parity_factor"]  # the error against the reference grew tenfold
MEMORY_RATIO = _DEFAULTS["memory_ratio"]  # peak memory up or down by more than 10%
PARITY_METRICS, COMPILE_METRICS = PARITY_FIGURES, COMPILE_FIGURES
LINES = {**_DEFAULTS, "min_samples": MIN_SAMPLES, "min_change": MIN_CHANGE}
# What a pair past a figure's line adds to its list, by list (name, A's value, B's value).
FIGURE_ENTRIES = {
    "parity": lambda name, x, y: {"metric": name, "before": x, "after": y, "factor": y / x},
    "compile": lambda name, x, y: {
        "metric": name,
        "before_s": x,
        "after_s": y,
        "ratio": y / x,
        "verdict": "slower" if y > x else "faster",
    },
    "memory": lambda name, x, y: {"before_bytes": x, "after_bytes": y, "ratio": y / x},
}
# Shown first when the environments differ; any other differing key follows.
ENV_ORDER = (
    "torch",
    "torch_git",
    "torch_cuda",
    "torch_hip",
    "transformers",
    "triton",
    "backend_packages",
    "device",
    "device_name",
    "device_count",
    "runtime",
    "driver",
    "cpu",
    "python",
    "os",
    "torchport",
    "torchport_git",
)
RUN_FIELDS = ("id", "suite", "device", "state", "labels", "started_at")
STATUS_LISTS = ("newly_failing", "newly_passing", "failure_changed")
PLACEMENT = PLACEMENT_RULE.name  # the ops added and removed are listed in _placement
VERDICTS_COUNTED = (SLOWER, FASTER, NOT_JUDGED)  # a timed pair with none of them: WITHIN
# The lists a comparison shows, in its order, and the store's decisions each is read from.
LIST_READS = {
    "newly_failing": ("newly_failing",),
    "newly_passing": ("newly_passing",),
    "failure_changed": ("failure_changed",),
    "host_ops": (PLACEMENT,),
    "parity": PARITY_FIGURES,
    "perf": ("perf",),
    "compile": COMPILE_FIGURES,
    "memory": tuple(r.figure for r in FIGURE_RULES if r.shows_in == "memory"),
}


@dataclass
class PerfChange:
    case: str
    mode: str
    before_ms: float
    after_ms: float
    ratio: float
    verdict: str
    test: str


@dataclass
class Comparison:
    run_a: dict
    run_b: dict
    environment: list[dict] = field(default_factory=list)  # key, a, b
    common: int = 0
    only_a: list[list[str]] = field(default_factory=list)  # [case, mode]
    only_b: list[list[str]] = field(default_factory=list)
    unrecorded_a: int = 0  # of only_b: planned by A but not recorded (A interrupted)
    unrecorded_b: int = 0
    transitions: dict[str, dict[str, int]] = field(default_factory=dict)
    newly_passing: list[dict] = field(default_factory=list)
    newly_failing: list[dict] = field(default_factory=list)
    failure_changed: list[dict] = field(default_factory=list)
    placement: list[dict] = field(default_factory=list)
    host_ops: dict[str, dict[str, Any]] = field(default_factory=dict)  # added, removed, class
    parity: list[dict] = field(default_factory=list)
    perf: list[PerfChange] = field(default_factory=list)
    perf_verdicts: dict[str, int] = field(default_factory=dict)
    compile: list[dict] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)
    notes: list[dict] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)
    # Each run's host-op inventory and grades, and what changed (views/compare_placement.py):
    # said even where one side has no placement data.
    placement_summary: dict = field(default_factory=dict)
    # The dist suite's collective status, bus bandwidth and training parity (views/compare_dist.py)
    dist: dict = field(default_factory=dict)
    # The ops suite's "X of Y overloads tested" of each run and what changed (views/op_coverage.py)
    coverage: dict = field(default_factory=dict)
    # Each list's length when the lists hold only their first rows (a page: compare_runs with
    # a limit); empty when every list is whole.
    totals: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON form. Its lists are the comparison's own (not copied: a whole comparison
        of two 100 000-result runs holds tens of thousands of entries); only the step-time
        changes are made dicts."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["perf"] = [dict(vars(p)) for p in self.perf]  # flat: no deep copy needed
        return out


def run_brief(run: dict) -> dict:
    return {k: run.get(k) for k in RUN_FIELDS}


def environment_diff(env_a: dict, env_b: dict) -> list[dict]:
    keys = [k for k in ENV_ORDER if k in env_a or k in env_b]
    keys += sorted((set(env_a) | set(env_b)) - set(ENV_ORDER))
    return [
        {"key": k, "a": env_a.get(k), "b": env_b.get(k)}
        for k in keys
        if env_a.get(k) != env_b.get(k)
    ]


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


def metrics(result: dict) -> dict:
    """A result's metrics, or an outcome row's key figures (``store.iter_outcomes``: every
    figure compare, baseline and gate read)."""
    value = result["figures"] if "figures" in result else result.get("metrics")
    return value if isinstance(value, dict) else {}


def _first_line(result: dict) -> str | None:
    if "error_line" in result:
        return result["error_line"] or None
    message = ((result.get("error") or {}).get("message") or "").strip()
    return message.splitlines()[0] if message else None


def _host_ops(result: dict) -> tuple[dict[str, Any], dict[str, str]]:
    """(op -> calls, op -> evidence class): the stored ``host_ops`` column, whose classes are
    stored beside the ops, or the findings; rows stored before the classes were have none,
    unless their findings are at hand."""
    findings = result.get("findings") or {}
    ops = result["host_ops"] if "host_ops" in result else findings.get("fallback_ops")
    if not isinstance(ops, dict):
        return {}, {}
    classes = ops.get(HOST_OP_CLASSES)
    ops = {k: v for k, v in ops.items() if k != HOST_OP_CLASSES}
    if not isinstance(classes, dict):
        classes = host_op_classes(findings.get("host_ops"), ops)
    return ops, classes


def host_ops_key(result: dict) -> str | None:
    """The host-op table as the store holds it (the ``host_ops`` column's text,
    records/sql_common.py ``host_ops_text``): what the placement rule compares, from an
    outcome row's cell or from a result's findings."""
    if "host_ops" not in result:
        return host_ops_text(result.get("findings") or {})
    ops = result["host_ops"]
    return json.dumps(ops, sort_keys=True, separators=(",", ":"), default=str) if ops else None


def _status_entry(case: str, mode: str, a: dict, b: dict) -> dict:
    return {
        "case": case,
        "mode": mode,
        "before": a["status"],
        "before_stage": a.get("stage"),
        "after": b["status"],
        "after_stage": b.get("stage"),
        "error": _first_line(b) or _first_line(a),
    }


def _count(out: Comparison, before: str, after: str, n: int = 1) -> None:
    row = out.transitions.setdefault(before, {})
    row[after] = row.get(after, 0) + n


def _placement(out: Comparison, case: str, mode: str, a: dict, b: dict) -> None:
    if a.get("grade") is None or b.get("grade") is None:
        return  # placement measured in one run only: nothing to compare
    (ops_a, classes_a), (ops_b, classes_b) = _host_ops(a), _host_ops(b)

    def ranked(ops: set, classes: dict) -> list[str]:  # class first (a before b before c)
        return sorted(ops, key=lambda op: (classes.get(op, "e"), op))

    added = ranked(set(ops_b) - set(ops_a), classes_b)
    removed = ranked(set(ops_a) - set(ops_b), classes_a)
    if not (added or removed or a["grade"] != b["grade"]):
        return
    out.placement.append(
        {
            "case": case,
            "mode": mode,
            "before": a.get("grade"),
            "after": b.get("grade"),
            "host_ops_added": added,
            "host_ops_removed": removed,
        }
    )
    for side, ops, classes in (("added", added, classes_b), ("removed", removed, classes_a)):
        for op in ops:
            _host_op_entry(out, op, classes.get(op))[side].append([case, mode])


def _host_op_entry(out: Comparison, op: str, op_class: str | None) -> dict[str, Any]:
    """``out.host_ops``' entry for ``op`` (added, removed, class), its class the first (a
    before b before c) of the one it has and ``op_class``."""
    entry = out.host_ops.setdefault(op, {"added": [], "removed": []})
    if op_class is not None:
        entry["class"] = min(entry.get("class", "e"), op_class)
    return entry


def both_timed(a: dict, b: dict) -> bool:
    """A step time is comparable only when both runs ran the whole ladder and timed it."""
    return (
        a["status"] == b["status"] == "pass"
        and bool(metrics(a).get("perf_median_ms"))
        and bool(metrics(b).get("perf_median_ms"))
    )


def decide(a: dict, b: dict) -> frozenset[str]:
    """What holds of one pair, decided in Python from the declared rules: the names the
    store's SQL decides (records/queries.py decided_names; a timed pair within the noise
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


@functools.lru_cache(maxsize=1024)
def _shows(decided: frozenset[str]) -> tuple[tuple[str, ...], bool, tuple, tuple[str, ...]]:
    """What a pair with these decisions shows in (a few distinct sets among the pairs of two
    runs: each worked out once): its status lists, whether it is a placement candidate, its
    figure rules past their lines, its step-time verdicts."""
    return (
        tuple(name for name in STATUS_LISTS if name in decided),
        PLACEMENT in decided,
        tuple(rule for rule in FIGURE_RULES if rule.figure in decided),
        tuple(verdict for verdict in (SLOWER, FASTER) if verdict in decided),
    )


def _show(out: Comparison, a: dict, b: dict, decided: frozenset[str]) -> None:
    """Format one pair into each list its decisions name (nothing is decided here)."""
    case, mode = a["case"], a["mode"]
    statuses, placement, rules, verdicts = _shows(decided)
    for name in statuses:
        getattr(out, name).append(_status_entry(case, mode, a, b))
    if placement:
        _placement(out, case, mode, a, b)
    ma, mb = metrics(a), metrics(b)
    for rule in rules:
        x, y = ma[rule.figure], mb[rule.figure]
        entry = FIGURE_ENTRIES[rule.shows_in](rule.figure, x, y)
        getattr(out, rule.shows_in).append({"case": case, "mode": mode, **entry})
    for verdict in verdicts:
        judged = change(ma, mb, verdict)
        out.perf.append(
            PerfChange(
                case,
                mode,
                judged.before_ms,
                judged.after_ms,
                judged.ratio,
                judged.verdict,
                judged.test,
            )
        )


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
    """``results_*`` sorted by (case, mode): results or outcome rows (``store.iter_outcomes``)."""
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


def _remarks(out: Comparison, run_a: dict, run_b: dict) -> list[str]:
    remarks = [
        f"compared {out.common} (case, mode) pairs recorded in both runs; "
        f"{len(out.only_a)} only in A, {len(out.only_b)} only in B"
    ]
    for name, run, unrecorded in (("A", run_a, out.unrecorded_a), ("B", run_b, out.unrecorded_b)):
        if run.get("state") != "complete":
            remarks.append(
                f"run {name} ({run['id']}) is {run.get('state')}: compared on what "
                f"it recorded ({unrecorded} pairs it planned are missing)"
            )
    if run_a.get("suite") != run_b.get("suite"):
        remarks.append(
            f"different suites ({run_a.get('suite')} vs {run_b.get('suite')}): "
            "only the shared cases are compared"
        )
    judged = sum(n for v, n in out.perf_verdicts.items() if v != NOT_JUDGED)
    if out.perf_verdicts:
        remarks.append(
            f"step time: {judged} pairs judged against the measured noise, "
            + ", ".join(f"{n} {v}" for v, n in sorted(out.perf_verdicts.items()))
            + "; rule: each median outside the other run's p10-p90 and at least "
            f"{MIN_CHANGE:.0%} apart"
        )
    return remarks


def run_notes(store, run_a: str, run_b: str) -> list[dict]:
    """The notes a comparison shows: those on either run."""
    return store.notes(run_id=run_a) + (store.notes(run_id=run_b) if run_b != run_a else [])


def compare_runs(
    store,
    run_a: str,
    run_b: str,
    *,
    limit: int | None = None,
    rows: str | None = None,
    after: dict | None = None,
) -> Comparison:
    """Compare two stored runs. The store joins them and returns the transition counts and a
    superset of the pairs that may have changed; each of those is decided here as
    ``compare`` decides it, and every timed pair not returned was within the noise.
    ``limit``: each list holds only its first rows (``totals`` says how long it is); the
    database then counts and picks them, and only those pairs are read out (a page);
    ``rows``: with a limit, only that list (of LIST_READS) is read out, the others are left
    empty (their totals still counted); ``after``: the list from the pair after this one
    (compare_tables.after_row), a later page."""
    a, b = store.get_run(run_a, plan=False), store.get_run(run_b, plan=False)
    env_a = store.environment(a["environment_ids"][0]) if a["environment_ids"] else {}
    env_b = store.environment(b["environment_ids"][0]) if b["environment_ids"] else {}
    out = Comparison(
        run_a=run_brief(a),
        run_b=run_brief(b),
        environment=environment_diff(env_a, env_b),
        notes=run_notes(store, a["id"], b["id"]),
    )
    joined = (
        _every_pair(store, out, a["id"], b["id"])
        if limit is None
        else _first_pairs(store, out, a["id"], b["id"], limit, rows, after)
    )
    out.only_a, out.only_b = joined["only_a"], joined["only_b"]
    if out.only_a:  # read a plan (100 000 entries in a large sweep) only when it is asked
        plan_b = {tuple(item) for item in store.get_run(b["id"])["plan"] or []}
        out.unrecorded_b = sum(tuple(key) in plan_b for key in out.only_a)
    if out.only_b:
        plan_a = {tuple(item) for item in store.get_run(a["id"])["plan"] or []}
        out.unrecorded_a = sum(tuple(key) in plan_a for key in out.only_b)
    out.remarks = _remarks(out, a, b)
    out.placement_summary = placement_summary(store, a, b)
    out.remarks += out.placement_summary["remarks"]
    out.dist = dist_summary(store, a, b)
    out.coverage = coverage_summary(store, a, b)
    return out


def _transitions(out: Comparison, counts: dict) -> int:
    """Count the status transitions; returns the pairs timed on both sides."""
    timed = 0
    for (before, after), (n, n_timed) in sorted(counts.items()):
        _count(out, before, after, n)
        out.common += n
        timed += n_timed
    return timed


def _every_pair(store, out: Comparison, run_a: str, run_b: str) -> dict:
    """Every pair shown and tallied. Two large runs are cut in parts of A's cases
    (``store.case_parts``), one a core: this process shows the first part while forked
    children (records/forked.py) show the others, whose lists follow its own in case order
    (deciding and formatting 37 000 pairs is Python's work, which a thread cannot share)."""

    def here(cases: tuple[str | None, str | None]) -> dict:
        joined = store.compare_pairs(run_a, run_b, **LINES, cases=cases)
        _show_all(out, joined["pairs"])  # while the store counts the transitions
        return joined

    joined, parts = forked.spread(
        store.case_parts(run_a, forked.workers()),
        here,
        functools.partial(_shown, store, run_a, run_b),
    )
    for part in parts:
        _add_part(out, part)
    joined = joined["tally"]()
    timed = _transitions(out, joined["counts"])
    judged = sum(out.perf_verdicts.values())
    if timed > judged:  # outside the superset: the medians sat inside each other's spread
        out.perf_verdicts[WITHIN] = out.perf_verdicts.get(WITHIN, 0) + timed - judged
    return joined


# What showing and tallying pairs fills in (``_show``, ``_tally``): a part's share.
_PART_FIELDS = (*STATUS_LISTS, "placement", *FIGURE_ENTRIES, "perf")


def _shown(store, run_a: str, run_b: str, cases: tuple[str | None, str | None]) -> dict:
    """In a forked child: one part's pairs shown and tallied, read on connections of its
    own; what they filled in (``_add_part``)."""
    out = Comparison(run_a={}, run_b={})
    with store.reopened() as own:
        joined = own.compare_pairs(run_a, run_b, **LINES, cases=cases, counted=False)
        _show_all(out, joined["pairs"])
    part = {name: getattr(out, name) for name in _PART_FIELDS}
    return {**part, "host_ops": out.host_ops, "perf_verdicts": out.perf_verdicts}


def _show_all(out: Comparison, pairs: Iterable[tuple[dict, dict, frozenset[str]]]) -> None:
    """Each (outcome A, outcome B, decisions) of a store's ``compare_pairs`` shown and
    tallied."""
    for a, b, decided in pairs:
        _show(out, a, b, decided)
        _tally(out, decided)


def _add_part(out: Comparison, part: dict) -> None:
    """A later part's lists after this one's (case order), its verdicts counted in, its host
    ops' pairs after this one's (an op's class: the first of both, as ``_placement``)."""
    for name in _PART_FIELDS:
        getattr(out, name).extend(part[name])
    for verdict, n in part["perf_verdicts"].items():
        out.perf_verdicts[verdict] = out.perf_verdicts.get(verdict, 0) + n
    for op, theirs in part["host_ops"].items():
        entry = _host_op_entry(out, op, theirs.get("class"))
        entry["added"] += theirs["added"]
        entry["removed"] += theirs["removed"]


def _first_pairs(
    store, out: Comparison, run_a: str, run_b: str, limit: int, rows: str | None, after
) -> dict:
    """The database decides every pair, counts every list and picks the first ``limit``
    pairs of each (of list ``rows`` alone); each pair picked is shown in the lists it was
    picked for, in (case, mode) order."""
    only = LIST_READS[rows] if rows else None
    got = store.compare_lists(run_a, run_b, **LINES, limit=limit, only=only, after=after)
    timed = _transitions(out, got["counts"])
    decided = got["decided"]
    picked: dict[tuple[str, str], tuple[dict, dict, set[str]]] = {}
    # A pair in a status list and another list: the status list's read carries the error line
    for name, read in sorted(got["lists"].items(), key=lambda item: item[0] not in STATUS_LISTS):
        for a, b, holds in read:
            shown_for = {SLOWER, FASTER} if name == "perf" else {name}
            entry = picked.setdefault((a["case"], a["mode"]), (a, b, set()))
            entry[2].update(holds & shown_for)
    for key in sorted(picked):
        a, b, shown_for = picked[key]
        _show(out, a, b, frozenset(shown_for))
    del out.parity[limit:], out.compile[limit:]  # two figures' first pairs each: the first
    counted = {v: decided[v] for v in VERDICTS_COUNTED}
    counted[WITHIN] = timed - sum(counted.values())
    out.perf_verdicts = {v: n for v, n in counted.items() if n}
    figures = {name: sum(decided[m] for m in LIST_READS[name]) for name in FIGURE_ENTRIES}
    out.totals = {
        "newly_passing": decided["newly_passing"],
        "newly_failing": decided["newly_failing"],
        "failure_changed": decided["failure_changed"],
        "parity": figures["parity"],
        "perf": decided[SLOWER] + decided[FASTER],
        "compile": figures["compile"],
        "memory": figures["memory"],
    }
    return got
