"""An export file's result line (kb/exchange.py ``result_line``, as JSON text) put
together from a result row's stored texts, with no parse and encode per result: the JSON
columns are spliced in as stored (Python's json.dumps wrote them), the other columns quoted,
the op table rendered from its rows. It parses to what ``result_line`` makes of the row.

A row is spliced only when the database found its JSON columns to be JSON (``plain``,
queries.result_lines) and each column holds the kind a result reads (an object, the
artifacts a list); any other row (NaN, which Python writes and the databases refuse; a text
changed outside torchport) is left to the caller, which reads it as ``SQLStore._result_dict``
does.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _quote
from typing import Any

# The columns after ``plain`` in a row of queries.result_lines, in order.
COLUMNS = (
    "id",
    "case_id",
    "case_version",
    "mode",
    "status",
    "stage",
    "grade",
    "artifacts",
    "durations",
    "findings",
    "metrics",
    "probe_versions",
    "error_type",
    "error_message",
    "traceback",
    "started_at",
    "finished_at",
)


def scalar(value: Any) -> str:
    """A column's value as JSON (as kb/exchange.py's ``_canonical`` writes it)."""
    if type(value) is str:
        return _quote(value)
    if value is None:
        return "null"
    if type(value) is int:
        return str(value)
    return json.dumps(value, default=str)


def ops_text(ops: list[tuple] | None) -> str:
    """A result's op table rows, (op, device, count, fallback) in recorded order, as the
    line's ``ops``."""
    if not ops:
        return "[]"
    return (
        "["
        + ",".join(
            f'{{"count":{scalar(count)},"device":{scalar(device)},'
            f'"fallback":{"true" if fallback == 1 else "false"},"op":{scalar(op)}}}'
            for op, device, count, fallback in ops
        )
        + "]"
    )


def op_dicts(ops: list[tuple] | None) -> list[dict]:
    """The same rows as a result's ``ops`` (for a line the caller writes)."""
    return [
        {"op": op, "device": device, "count": count, "fallback": fallback == 1}
        for op, device, count, fallback in ops or ()
    ]


def line(run_id: str, row: tuple, ops: list[tuple] | None) -> str | None:
    """The export line of ``row`` (``plain`` then COLUMNS) of run ``run_id`` with its op
    table rows ``ops``, or None where the row's texts are not to be spliced."""
    (
        plain,
        _,
        case,
        case_version,
        mode,
        status,
        stage,
        grade,
        artifacts,
        durations,
        findings,
        metrics,
        probe_versions,
        error_type,
        error_message,
        traceback,
        started_at,
        finished_at,
    ) = row
    if not (
        plain
        and artifacts[:1] == "["
        and durations[:1] == "{"
        and findings[:1] == "{"
        and metrics[:1] == "{"
        and probe_versions[:1] == "{"
    ):
        return None
    try:  # a text column holding another type (changed outside torchport): not spliced
        error = (
            "null"
            if error_type is None and error_message is None
            else f'{{"message":{_text(error_message)},"traceback":{_text(traceback)},'
            f'"type":{_text(error_type)}}}'
        )
        return (
            f'{{"artifacts":{artifacts},"case":{_quote(case)},'
            f'"case_version":{scalar(case_version)},"durations":{durations},"error":{error},'
            f'"findings":{findings},"finished_at":{_quote(finished_at)},'
            f'"grade":{"null" if grade is None else _quote(grade)},"kind":"result",'
            f'"metrics":{metrics},"mode":{_quote(mode)},"ops":{ops_text(ops)},'
            f'"probe_versions":{probe_versions},"run_id":{_quote(run_id)},'
            f'"stage":{"null" if stage is None else _quote(stage)},'
            f'"started_at":{"null" if started_at is None else _quote(started_at)},'
            f'"status":{_quote(status)}}}'
        )
    except TypeError:
        return None


def _text(value: str | None) -> str:
    return "null" if value is None else _quote(value)
