"""Baselines: what a run is expected to produce, and the gate that holds a new run to it.

The expected file (JSON, ``torchport-baseline/1``) holds a status (and failing stage) per
(case, mode) and, for passing results with a step time, the median with its p10-p90 spread and
sample count: the measured noise the gate judges against (views/noise.py). A tolerance in the
file (``perf_tolerance`` at the top or per entry, a fraction) replaces the measured noise.

``gate`` lists regressions (the CI job fails) and improvements: a case that now passes, or
gets further up the ladder, or runs faster. Improvements pass the gate; the expected file
should then be saved again, as upstream expected-failure lists are updated.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from json.encoder import encode_basestring_ascii as _string
from typing import Any

from torchport.records.status import depth
from torchport.views.compare import metrics
from torchport.views.noise import FASTER, SLOWER, judge, step_verdict

FORMAT = "torchport-baseline/1"
PERF_KEYS = ("perf_median_ms", "perf_p10_ms", "perf_p90_ms", "perf_samples")
_TIMED = ("status", *PERF_KEYS)
_NUMBERS = {int, float}  # written by JSON as Python's repr when finite (a bool is not one)


class BaselineError(ValueError):
    """A baseline file that cannot be used, with what to fix."""


def status_row(result: dict) -> tuple:
    """A result (or outcome row) as the store's ``store.statuses`` gives it: (case, mode,
    status, stage, then PERF_KEYS' values)."""
    m = metrics(result)
    return (
        result["case"],
        result["mode"],
        result["status"],
        result.get("stage"),
        *(m.get(k) for k in PERF_KEYS),
    )


def make_baseline(
    run: dict, results: Iterable[dict], *, perf: bool = True, perf_tolerance: float | None = None
) -> dict:
    """The expected file for ``run`` (``results`` streamed; only their statuses and perf
    figures are kept)."""
    rows = (status_row(r) for r in results)
    return baseline_of_rows(run, rows, perf=perf, perf_tolerance=perf_tolerance)


def baseline_of_rows(
    run: dict, rows: Iterable[tuple], *, perf: bool = True, perf_tolerance: float | None = None
) -> dict:
    """``make_baseline`` from the store's plain rows (``store.statuses``): a run of
    100 000 results makes no dict a result but its entry."""
    return {**_head(run, perf_tolerance), "entries": dict(sorted(_entries(rows, perf).items()))}


def _head(run: dict, perf_tolerance: float | None) -> dict:
    return {
        "format": FORMAT,
        "from_run": run["id"],
        "suite": run["suite"],
        "device": run["device"],
        "labels": run.get("labels") or {},
        "perf_tolerance": perf_tolerance,
    }


def _entries(rows: Iterable[tuple], perf: bool) -> dict[str, dict]:
    entries: dict[str, dict] = {}
    for case, mode, status, stage, median, p10, p90, samples in rows:
        entry: dict
        if status != "pass":
            entry = {"status": status, "stage": stage} if stage else {"status": status}
        elif not (perf and median):
            entry = {"status": status}
        elif p10 is not None and p90 is not None and samples is not None:  # most: all four
            entry = dict(zip(_TIMED, (status, median, p10, p90, samples), strict=True))
        else:
            entry = {"status": status, "perf_median_ms": median}
            for k, v in zip(PERF_KEYS[1:], (p10, p90, samples), strict=True):
                if v is not None:
                    entry[k] = v
        entries[f"{case}|{mode}"] = entry
    return entries


def baseline_texts(
    store, run: dict, *, perf: bool = True, perf_tolerance: float | None = None
) -> tuple[dict, list[tuple[str, str]], int]:
    """What ``baseline save`` writes of a stored run: the file's head (``baseline_of_rows``
    but its entries), each entry's key and text (``entry_text``) in key order, and how many
    entries hold a step time. A large run is made in parts of its cases, one a core, the later
    ones by forked children (``store.statuses``); the same entries, in the same order."""
    texts: list[tuple[str, str]] = []
    timed = 0
    for part_texts, part_timed in store.statuses(
        run["id"], shape=functools.partial(_texts, perf=perf)
    ):
        texts += part_texts
        timed += part_timed
    texts.sort()  # each part's in key order; keys ("case|mode") sort apart from cases
    return _head(run, perf_tolerance), texts, timed


def _texts(rows: Iterable[tuple], perf: bool) -> tuple[list[tuple[str, str]], int]:
    entries = _entries(rows, perf)
    timed = sum(1 for e in entries.values() if "perf_median_ms" in e)
    return sorted((key, entry_text(e)) for key, e in entries.items()), timed


def entry_text(entry: dict) -> str:
    """``json.dumps(entry)`` of a baseline entry, written for its usual shapes without the
    encoder (a file of 100 000 entries: half the time); any other entry by ``json.dumps``."""
    keys = tuple(entry)
    if keys == _TIMED:
        status, median, p10, p90, samples = entry.values()
        kinds = {type(median), type(p10), type(p90), type(samples)}
        if (
            type(status) is str
            and kinds <= _NUMBERS
            # finite: x - x is 0 (NaN and infinities give NaN)
            and median - median == p10 - p10 == p90 - p90 == samples - samples == 0
        ):
            return (
                f'{{"status": {_string(status)}, "perf_median_ms": {median!r}, "perf_p10_ms":'
                f' {p10!r}, "perf_p90_ms": {p90!r}, "perf_samples": {samples!r}}}'
            )
    elif keys == ("status",) and type(entry["status"]) is str:
        return f'{{"status": {_string(entry["status"])}}}'
    elif keys == ("status", "stage") and type(entry["status"]) is type(entry["stage"]) is str:
        return f'{{"status": {_string(entry["status"])}, "stage": {_string(entry["stage"])}}}'
    return json.dumps(entry)


def load_baseline(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise BaselineError(
            f"no baseline file '{path}'; make one with 'torchport baseline save RUN -o FILE'"
        ) from None
    except (OSError, ValueError) as exc:
        raise BaselineError(
            f"baseline '{path}' is not readable JSON ({exc}); make it again "
            "with 'torchport baseline save RUN -o FILE'"
        ) from None
    if (
        not isinstance(data, dict)
        or data.get("format") != FORMAT
        or not isinstance(data.get("entries"), dict)
    ):
        raise BaselineError(
            f"'{path}' is not a torchport baseline (format {FORMAT}); make it "
            "with 'torchport baseline save RUN -o FILE'"
        )
    file_tolerance = data.get("perf_tolerance")
    for key, entry in data["entries"].items():
        if (
            "|" not in key
            or not isinstance(entry, dict)
            or not isinstance(entry.get("status"), str)
        ):
            raise BaselineError(
                f"baseline '{path}': entry {key!r} needs the form 'case|mode': {{\"status\": ...}}"
            )
        tol = entry.get("perf_tolerance", file_tolerance)
        if tol is not None and (
            isinstance(tol, bool) or not isinstance(tol, (int, float)) or tol < 0
        ):
            raise BaselineError(
                f"baseline '{path}': perf_tolerance of {key!r} must be a "
                f"fraction >= 0 (0.1 for 10%), not {tol!r}"
            )
    return data


@dataclass
class GateReport:
    baseline_run: str
    run: str
    regressions: list[dict] = field(default_factory=list)
    improvements: list[dict] = field(default_factory=list)
    new: list[dict] = field(default_factory=list)  # in the run, not in the baseline
    not_planned: int = 0  # baseline entries the run did not plan (a narrower selection)
    unchanged: int = 0
    checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.regressions

    def to_dict(self) -> dict:
        """The JSON form. Its lists are the report's own, not copied (``asdict`` deep-copies
        every finding: 0.3 s of a gate of two runs of 100 000 results); each finding is a
        flat dict the report never changes once made."""
        return {"ok": self.ok, **{f.name: getattr(self, f.name) for f in fields(self)}}


def _status_change(case: str, mode: str, was: str, was_stage, got: dict) -> dict:
    return {
        "case": case,
        "mode": mode,
        "expected": was,
        "expected_stage": was_stage,
        "got": got["status"],
        "got_stage": got.get("stage"),
    }


def _same_status(was: str, was_stage, now: str, now_stage) -> bool:
    """The same status, and for a failure the same stage (a pass has no stage)."""
    return was == now and (was == "pass" or was_stage == now_stage)


def _judge_status(report: GateReport, case: str, mode: str, expected: dict, got: dict) -> None:
    """Record a status change (the caller found one: ``_same_status`` is false)."""
    was, was_stage, now = expected["status"], expected.get("stage"), got["status"]
    entry = _status_change(case, mode, was, was_stage, got)
    before, after = depth(was, was_stage), depth(now, got.get("stage"))
    if was == "skip" and now == "pass":
        report.improvements.append({**entry, "kind": "now runs"})
    elif was == "skip":
        report.regressions.append({**entry, "kind": "ran and failed (was skipped)"})
    elif now == "skip":
        report.regressions.append({**entry, "kind": "skipped (was run)"})
    elif before is not None and after is not None and after > before:
        report.improvements.append(
            {**entry, "kind": "got further" if now != "pass" else "now passes"}
        )
    elif before is not None and after is not None and after < before:
        report.regressions.append(
            {**entry, "kind": "stopped earlier" if was != "pass" else "now fails"}
        )
    else:  # same depth, another failure (crash instead of timeout): not what was expected
        report.regressions.append({**entry, "kind": "failure changed"})


def gate(
    baseline: dict,
    run: dict,
    results: Iterable[dict],
    plan: Callable[[], list | None] | None = None,
) -> GateReport:
    """Hold ``run``'s ``results`` (streamed) to the baseline. The run's plan is ``run["plan"]``
    or, when the run was read without it, what ``plan()`` gives: read only when a baseline
    entry has no result (a plan holds 100 000 entries in a large sweep)."""
    return gate_rows(baseline, run, (status_row(r) for r in results), plan)


def gate_rows(
    baseline: dict,
    run: dict,
    rows: Iterable[tuple],
    plan: Callable[[], list | None] | None = None,
) -> GateReport:
    """``gate`` from the store's plain rows (``store.statuses``)."""
    report = GateReport(baseline_run=str(baseline.get("from_run")), run=run["id"])
    seen = _check_rows(report, baseline, rows)
    _check_missing(report, baseline, run, seen, plan)
    return report


def gate_run(
    store,
    baseline: dict,
    run: dict,
    plan: Callable[[], list | None] | None = None,
    entries: Callable[[dict], Any] | None = None,
) -> GateReport:
    """``gate_rows`` over the store's rows of ``run``. A large run is held to the baseline in
    parts of its cases, one a core (``store.statuses``): this process checks the first while
    forked children (which inherit the baseline as read) check the others; their findings
    follow in case order, as one process lists them. ``entries``: each finding of the parts
    made this where its part is checked (``gate --json``: its JSON text, two cores at once;
    docs/at-a-glance.md, issue 46); a baseline entry the run did not record stays a dict."""
    report = GateReport(baseline_run=str(baseline.get("from_run")), run=run["id"])
    seen: set[str] = set()
    for part, their_seen in store.statuses(
        run["id"], shape=functools.partial(_gate_part, baseline, entries=entries)
    ):
        for name in ("regressions", "improvements", "new"):
            getattr(report, name).extend(getattr(part, name))
        report.checked += part.checked
        report.unchanged += part.unchanged
        seen.update(their_seen)
    _check_missing(report, baseline, run, seen, plan)
    return report


def _gate_part(
    baseline: dict, rows: Iterable[tuple], entries: Callable[[dict], Any] | None = None
) -> tuple[GateReport, list[str]]:
    """One part's rows checked (in a forked child for a later part): its findings (each
    made ``entries`` where given) and the baseline keys it saw."""
    report = GateReport(baseline_run="", run="")
    seen = _check_rows(report, baseline, rows)
    if entries is not None:
        for name in ("regressions", "improvements", "new"):
            setattr(report, name, list(map(entries, getattr(report, name))))
    return report, list(seen)


def _check_rows(report: GateReport, baseline: dict, rows: Iterable[tuple]) -> set[str]:
    """Each row held to its baseline entry (``report`` filled in); the keys seen."""
    entries = baseline["entries"]
    file_tolerance = baseline.get("perf_tolerance")
    seen: set[str] = set()
    for case, mode, status, stage, median, p10, p90, samples in rows:
        key = f"{case}|{mode}"
        expected = entries.get(key)
        if expected is None:
            report.new.append({"case": case, "mode": mode, "got": status})
            continue
        seen.add(key)
        report.checked += 1
        if not _same_status(expected["status"], expected.get("stage"), status, stage):
            _judge_status(report, case, mode, expected, {"status": status, "stage": stage})
            continue
        if status == "pass" and expected.get("perf_median_ms"):
            got = {
                "perf_median_ms": median,
                "perf_p10_ms": p10,
                "perf_p90_ms": p90,
                "perf_samples": samples,
            }
            tol = expected.get("perf_tolerance", file_tolerance)
            # the verdict alone first: the wording only for the few that changed
            judged = (
                judge(expected, got, tolerance=tol, names=("baseline", "run"))
                if step_verdict(expected, got, tolerance=tol) in (SLOWER, FASTER)
                else None
            )
            if judged is not None:
                item = {
                    "case": case,
                    "mode": mode,
                    "kind": f"step {judged.verdict}",
                    "expected": judged.before_ms,
                    "got": judged.after_ms,
                    "ratio": judged.ratio,
                    "test": judged.test,
                }
                (report.regressions if judged.verdict == SLOWER else report.improvements).append(
                    item
                )
                continue
        report.unchanged += 1
    return seen


def _check_missing(
    report: GateReport,
    baseline: dict,
    run: dict,
    seen: set[str],
    plan: Callable[[], list | None] | None,
) -> None:
    """The baseline entries the run recorded no result for: a regression where the run
    planned them, else not checked."""
    entries = baseline["entries"]
    missing = sorted(entries.keys() - seen)
    items = (run["plan"] if "plan" in run else plan() if plan else None) if missing else None
    planned = {f"{c}|{m}" for c, m in items or []}
    for key in missing:
        case, _, mode = key.partition("|")
        if key not in planned:
            report.not_planned += 1
            continue
        report.checked += 1
        report.regressions.append(
            {
                "case": case,
                "mode": mode,
                "kind": "missing (not recorded)",
                "expected": entries[key]["status"],
                "got": None,
            }
        )
