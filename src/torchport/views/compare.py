"""Compare two runs: only the (case, mode) pairs recorded in both, every figure with its test.

What changed between two runs of a suite, across devices (cuda vs neuron) or across releases
(one device, two environments): the environment difference first, then status transitions (a
matrix and lists), placement changes per host op, parity drift, step-time changes beyond the
measured noise (views/noise.py), compile-time changes past PyTorch HUD's line, and peak
memory (each line declared in records/figures.py). Interrupted runs compare on what they
recorded; the denominators say so.

One path: ``compare_runs`` makes one store read (``store.compare``, kb/reads/compare.py),
with or without a limit, and formats what it returns. Each pair's decisions (which lists it
shows in: the status lists, the placement candidate, each FigureRule of records/figures.py past
its line, the step-time verdict) are made by the database from the declared rules, and
``_show`` only formats a pair into the lists its decisions name. Two runs of 100 000 results
never sit in memory, and most pairs never leave the database. The Python oracle that walks two
result streams and decides each pair from the same rules is tests/compare_oracle.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from torchport.kb.sql_common import HOST_OP_CLASSES, host_op_classes
from torchport.records.figures import (
    COMPARE_LINES,
    COMPILE_FIGURES,
    FIGURE_RULES,
    PARITY_FIGURES,
    PLACEMENT_RULE,
    STEP_TIME,
)
from torchport.views.compare_dist import dist_changes
from torchport.views.compare_placement import summarize
from torchport.views.noise import (
    FASTER,
    NOT_JUDGED,
    SLOWER,
    WITHIN,
    change,
)
from torchport.views.op_coverage import coverage, diff, slim

# Each figure's rule and line is declared once, in records/figures.py FIGURE_RULES.
_DEFAULTS = COMPARE_LINES
COMPILE_RATIO = _DEFAULTS["compile_ratio"]  # records/figures.py COMPILE_LINE
PARITY_FACTOR = _DEFAULTS["parity_factor"]  # PARITY_LINE
MEMORY_RATIO = _DEFAULTS["memory_ratio"]  # MEMORY_LINE
PARITY_METRICS, COMPILE_METRICS = PARITY_FIGURES, COMPILE_FIGURES
LINES = COMPARE_LINES
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
        # flat: no deep copy needed; an entry made text (compare_runs ``entries``) as it is
        out["perf"] = [dict(vars(p)) if type(p) is PerfChange else p for p in self.perf]
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


def metrics(result: dict) -> dict:
    """A result's metrics, or an outcome row's key figures (``store.statuses(outcomes=True)``: every
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
            + f"; rule: {STEP_TIME.words}"
        )
    return remarks


def compare_runs(
    store,
    run_a: str,
    run_b: str,
    *,
    limit: int | None = None,
    rows: str | None = None,
    after: dict | None = None,
    entries: Callable[[Any], Any] | None = None,
) -> Comparison:
    """Compare two stored runs: what the store's one read (``store.compare``,
    kb/reads/compare.py) returns, formatted; every pair it returns was decided by the
    database, from the declared rules. ``limit``: each list holds only its first rows
    (``totals`` says how long it is); ``rows``: with a limit, only that list (of LIST_READS)
    is read out, the others are left empty (their totals still counted); ``after``: the list
    from the pair after this one (compare_tables.after_row), a later page. ``entries``:
    each entry of the ENTRY_LISTS made this (its JSON form, a step-time change as a dict)
    in the process that shaped its part, a forked child for a later part: ``compare
    --json`` has each part's entries made text where the part is shaped, two cores at once,
    not all of them after (docs/at-a-glance.md, issue 46)."""
    return compare_again(
        store, run_a, run_b, None, limit=limit, rows=rows, after=after, entries=entries
    )[1]


Kept = tuple[tuple, Comparison]  # a comparison and the version of both runs it was read from


def compare_again(
    store,
    run_a: str,
    run_b: str,
    kept: Kept | None,
    *,
    limit: int | None = None,
    rows: str | None = None,
    after: dict | None = None,
    entries: Callable[[Any], Any] | None = None,
) -> Kept:
    """``compare_runs``, and the runs' version it was read from; ``kept``: a comparison made
    before (the same reads), given again with the notes read now where both runs are as
    they were then (the store's read says so: ``unless``), so two runs of 100 000 results
    are not joined again."""
    only = LIST_READS[rows] if rows and limit is not None else None
    got = store.compare(
        run_a,
        run_b,
        limit=limit,
        only=only,
        after=after,
        shape=_shown if entries is None else functools.partial(_shown, entries=entries),
        unless=kept[0] if kept is not None else None,
    )
    if got["unchanged"] and kept is not None:
        return kept[0], replace(kept[1], notes=got["notes"])
    a, b = got["runs"]
    out = Comparison(
        run_a=run_brief(a),
        run_b=run_brief(b),
        environment=environment_diff(*got["environments"]),
        notes=got["notes"],
    )
    timed = _transitions(out, got["counts"])
    order: list[str] = []
    for part in got["parts"]:
        _add_part(out, part)
        order += [v for v in part["verdicts"] if v not in order]
    decided = got["decided"]
    if limit is not None:  # a page shows only some pairs: the lists' order
        order = list(VERDICTS_COUNTED)
    counted = {v: decided[v] for v in order}
    counted[WITHIN] = timed - sum(decided[v] for v in VERDICTS_COUNTED)  # the rest timed
    out.perf_verdicts = {v: n for v, n in counted.items() if n}
    if limit is not None:
        del out.parity[limit:], out.compile[limit:]  # two figures' first pairs each: the first
        figures = {name: sum(decided[m] for m in LIST_READS[name]) for name in FIGURE_ENTRIES}
        out.totals = {
            **{name: decided[name] for name in STATUS_LISTS},
            "parity": figures["parity"],
            "perf": decided[SLOWER] + decided[FASTER],
            "compile": figures["compile"],
            "memory": figures["memory"],
        }
    out.only_a, out.only_b = got["only_a"], got["only_b"]
    out.unrecorded_a, out.unrecorded_b = got["unrecorded_a"], got["unrecorded_b"]
    out.remarks = _remarks(out, a, b)
    out.placement_summary = summarize(a, b, *got["headline"])
    out.remarks += out.placement_summary["remarks"]
    out.dist = dist_changes(*got["dist"])
    out.coverage = diff(
        *(
            None if results is None else coverage(run, [s for r in results if (s := slim(r))])
            for run, results in zip((a, b), got["audited"], strict=True)
        )
    )
    return got["version"], out


def _transitions(out: Comparison, counts: dict) -> int:
    """Count the status transitions; returns the pairs timed on both sides."""
    timed = 0
    for (before, after), (n, n_timed) in sorted(counts.items()):
        _count(out, before, after, n)
        out.common += n
        timed += n_timed
    return timed


# What showing pairs fills in (``_show``): a part's share.
_PART_FIELDS = (*STATUS_LISTS, "placement", *FIGURE_ENTRIES, "perf")
# The lists whose entries compare_runs' ``entries`` makes.
ENTRY_LISTS = _PART_FIELDS


def _shown(
    pairs: Iterable[tuple[dict, dict, frozenset[str]]],
    entries: Callable[[Any], Any] | None = None,
) -> dict:
    """One part's pairs (outcome A, outcome B, decisions) shown in the lists their decisions
    name: what they filled in (``_add_part``); ``entries``: each list entry made that (a
    step-time change given as a dict). Called by the store's read, in a forked child for a
    later part (kb/forked.py)."""
    out = Comparison(run_a={}, run_b={})
    kinds: set[frozenset[str]] = set()
    verdicts: list[str] = []  # the order they first show in, as the JSON lists them
    for a, b, decided in pairs:
        _show(out, a, b, decided)
        if decided not in kinds:
            kinds.add(decided)
            verdicts += [v for v in VERDICTS_COUNTED if v in decided and v not in verdicts]
    part = {name: getattr(out, name) for name in _PART_FIELDS}
    if entries is not None:
        part = {
            name: list(map(entries, map(vars, items) if name == "perf" else items))
            for name, items in part.items()
        }
    return {**part, "host_ops": out.host_ops, "verdicts": verdicts}


def _add_part(out: Comparison, part: dict) -> None:
    """A later part's lists after this one's (case order), its host ops' pairs after this
    one's (an op's class: the first of both, as ``_placement``)."""
    for name in _PART_FIELDS:
        getattr(out, name).extend(part[name])
    for op, theirs in part["host_ops"].items():
        entry = _host_op_entry(out, op, theirs.get("class"))
        entry["added"] += theirs["added"]
        entry["removed"] += theirs["removed"]
