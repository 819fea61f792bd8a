"""Operator compatibility table of an ``ops`` run: one row per OpInfo op.

Columns: the dtypes that pass, fail (with how) and were skipped (with why), how the op ran on the
device (``device``: its own kernels; ``composite``: torch decomposed it into ops that ran on the
device; ``fallback``: some of its aten ops ran on the host; ``host``: none ran on a device
kernel), the aten ops that fell back, and the worst relative error against the reference.
The first note is the summary line. The table replaces the per-result matrix and placement
views for such a run (``supersedes``), which would list thousands of rows.
"""

from __future__ import annotations

from collections import Counter

from torchport.records.status import STATUS, is_failure
from torchport.views import op_coverage, ops_not_run
from torchport.views.base import View, columns

SHORT = {
    "float32": "f32",
    "bfloat16": "bf16",
    "float16": "f16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "bool",
}
COLUMNS = columns(
    "op", "pass", "fail", "skip", "runs as", "host ops", ("worst rel err", "sci"), "worst dtype"
)


def _kind(status: str) -> str:
    """How a failed dtype is named in the table: the status's short label."""
    return STATUS[status].short if status in STATUS else status


def is_op_result(result: dict) -> bool:
    return (result.get("findings") or {}).get("ladder") == "op" or result["case"].startswith("ops/")


def is_schema_result(result: dict) -> bool:
    """A schema case's result (a crashed one has no findings: its case id says)."""
    return (result.get("findings") or {}).get("ladder") == "schema" or result["case"].startswith(
        "schema/"
    )


def schema_line(results: list[dict]) -> str | None:
    """The schema cases' line (``schema/<packet>``, docs/suites/ops.md): overloads called with
    schema-made inputs, checked, failed and not run by reason."""
    schema = [r for r in results if is_schema_result(r)]
    if not schema:
        return None
    states: Counter[str] = Counter()
    for r in schema:
        states.update(((r.get("findings") or {}).get("schema") or {}).values())
    metadata = sum((r.get("metrics") or {}).get("schema_metadata_only", 0) for r in schema)
    judged = states["checked"] + states["failed"]
    rest = ", ".join(f"{k} {n}" for k, n in states.most_common() if k not in ("checked", "failed"))
    return (
        f"schema samples: {sum(states.values())} overloads of {len(schema)} packets: "
        f"{judged} judged on the device ({states['failed']} failed, {metadata} by shape and "
        f"dtype only: outputs not determined by the inputs), "
        f"{sum(states.values()) - judged} not run" + (f" ({rest})" if rest else "")
    )


def split_case(case_id: str) -> tuple[str, str]:
    """``ops/max.reduction_with_dim/int64`` -> ("max.reduction_with_dim", "int64")."""
    body = case_id.removeprefix("ops/")
    op, _, dtype = body.rpartition("/")
    return (op, dtype) if op else (body, "")


def short_op(name: str) -> str:
    return name.removeprefix("aten.").removesuffix(".default")


def runs_as(result: dict) -> str | None:
    grade = result.get("grade")
    if grade is None:
        return None
    if grade != "on_device":
        return grade
    return "composite" if (result.get("findings") or {}).get("served") == "composite" else "device"


def _cells(rows: list[dict]) -> list:
    passed, failed, skipped, ways, worst = [], [], [], [], None
    host: Counter[str] = Counter()
    for r in rows:
        dtype = SHORT.get(r["dtype"], r["dtype"])
        status, findings = r["result"]["status"], r["result"].get("findings") or {}
        if status == "pass":
            passed.append(dtype)
        elif status == "skip":
            skipped.append(f"{dtype} ({findings.get('skip', 'skip')})")
        else:
            failed.append(f"{dtype} ({_kind(status)})")
        way = runs_as(r["result"]) if status != "skip" else None  # a skip's ops are no verdict
        if way and way not in ways:
            ways.append(way)
        host.update(short_op(op) for op in findings.get("fallback_ops") or {})
        rel = (r["result"].get("metrics") or {}).get("parity_max_rel_err")
        if rel is not None and (worst is None or rel > worst[0]):
            worst = (rel, dtype)
    host_cell = ", ".join(op for op, _ in host.most_common(4)) + (
        f" (+{len(host) - 4})" if len(host) > 4 else ""
    )
    return [
        " ".join(passed),
        ", ".join(failed),
        ", ".join(skipped),
        "/".join(ways) or None,
        host_cell,
        worst[0] if worst else None,
        worst[1] if worst else None,
    ]


def summary_line(results: list[dict]) -> str:
    """ "N results: P passed, F failed (how), S skipped (reasons)": the vendors' line."""
    status = Counter(r["status"] for r in results)
    failed = {_kind(s): n for s, n in status.items() if is_failure(s)}
    reasons = Counter(
        (r.get("findings") or {}).get("skip", "other") for r in results if r["status"] == "skip"
    )
    line = (
        f"{len(results)} results: {status['pass']} passed, {sum(failed.values())} failed"
        + (f" ({', '.join(f'{k} {v}' for k, v in sorted(failed.items()))})" if failed else "")
        + f", {status['skip']} skipped"
    )
    if reasons:
        line += f" ({', '.join(f'{k} {v}' for k, v in reasons.most_common())})"
    return line


def _notes(
    run: dict, results: list[dict], by_op: dict, cov, schema: list[dict] | None = None
) -> list[str]:
    from torchport.cases.ops_reasons import SKIP_REASONS

    schema = schema or []
    notes = [
        summary_line(results + schema),
        ops_not_run.note(ops_not_run.not_run(results + schema)),
    ]
    if cov is not None:
        notes.append(op_coverage.summary(cov))
    line = schema_line(schema)
    if line:
        notes.append(line)
    metrics = [r.get("metrics") or {} for r in results]
    total = sum(m.get("ops_samples", 0) for m in metrics)
    if total:
        sample_skips: Counter[str] = Counter()
        for r in results:
            sample_skips.update((r.get("findings") or {}).get("sample_skips") or {})
        notes.append(
            f"samples: {total} in ran cases, "
            f"{sum(m.get('ops_samples_checked', 0) for m in metrics)}"
            f" checked forward ({sum(m.get('ops_backward_checked', 0) for m in metrics)} also "
            f"backward), {sum(m.get('ops_samples_failed', 0) for m in metrics)} failed, "
            f"{sum(sample_skips.values())} skipped"
            + (
                f" ({', '.join(f'{k} {v}' for k, v in sample_skips.most_common())})"
                if sample_skips
                else ""
            )
        )
    ways: Counter[str] = Counter()
    for rows in by_op.values():
        found = {runs_as(r["result"]) for r in rows if r["result"]["status"] != "skip"} - {None}
        for way in ("host", "fallback", "composite", "device"):
            if way in found:
                ways[way] += 1
                break
    if ways:
        notes.append(
            f"{sum(ways.values())} ops ran on {run.get('device')}: "
            + ", ".join(
                f"{ways[w]} {w}" for w in ("device", "composite", "fallback", "host") if ways[w]
            )
            + " (the worst of its dtypes)"
        )
    aten: dict[str, bool] = {}
    for r in results:
        for row in (r.get("findings") or {}).get("ops") or ():
            if "->" not in row["device"]:
                aten[row["op"]] = aten.get(row["op"], False) or bool(row.get("fallback"))
    if aten:
        notes.append(
            f"{len(aten)} aten overloads dispatched, {sum(aten.values())} of them fell "
            "back to the host ('torchport results --fallback-op aten.X' lists who)"
        )
    shaped = {split_case(r["case"])[0] for r in results if (r.get("findings") or {}).get("op_tags")}
    if shaped:
        notes.append(
            f"{len(shaped)} ops have data-dependent output shapes or values (run in "
            "eager like the rest; a compiled mode would need them apart)"
        )
    expected = {
        split_case(r["case"])[0]
        for r in results
        if is_failure(r["status"]) and (r.get("findings") or {}).get("opinfo_expected_failure")
    }
    if expected:
        notes.append(
            f"{len(expected)} failing ops are expected failures in OpInfo on this "
            f"device type: {', '.join(sorted(expected)[:8])}"
        )
    notes.append("skip reasons: " + "; ".join(f"{k}: {v}" for k, v in SKIP_REASONS.items()))
    notes.append(
        f"CSV: torchport show {run.get('id', 'RUN')} --csv ops"
        + (" (every overload's coverage: --csv ops-coverage)" if cov is not None else "")
    )
    return notes


def build(run: dict, results: list[dict]) -> View | None:
    chosen = [r for r in results if is_op_result(r)]
    schema = [r for r in results if is_schema_result(r)]
    cov = op_coverage.coverage(run, results)
    if not chosen and not schema and cov is None:
        return None
    by_op: dict[str, list[dict]] = {}
    for r in chosen:
        op, dtype = split_case(r["case"])
        by_op.setdefault(op, []).append({"dtype": dtype, "result": r})
    rows = [[op] + _cells(by_op[op]) for op in sorted(by_op)]
    return View(
        f"Operator compatibility on {run.get('device')} ({len(by_op)} ops)",
        COLUMNS,
        rows,
        _notes(run, chosen, by_op, cov, schema),
        supersedes=("matrix", "placement"),
    )
