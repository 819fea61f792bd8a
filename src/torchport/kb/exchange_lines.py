"""One line of an export file, parsed and checked before anything is written (import reads
the whole file through here first): depth-limited JSON, every record kind's fields with
their types, whole numbers a database column can hold. A problem is one sentence; the
caller prefixes where it is.

A run recorded as ``running`` elsewhere has no live supervisor here: it is imported as
``interrupted``, so it can be resumed, exported and finished like any other.
"""

from __future__ import annotations

import json
from typing import Any

from torchport.kb.sql_common import redact
from torchport.records.result import MalformedResult, Result

FORMAT = "torchport-export/1"  # an export file's header names it
MAX_DEPTH = 64  # far past any record torchport writes (findings nest about 6 deep)
INT_RANGE = (-(2**63), 2**63 - 1)  # a 64-bit integer column, in SQLite and PostgreSQL
RUN_STATES = ("running", "complete", "interrupted")


class BadLine(ValueError):
    """The line's problem, in words."""


def parse(text: str) -> Any:
    """``text`` as JSON, refused when it nests past MAX_DEPTH or holds a whole number no
    column can hold."""
    try:
        obj = json.loads(text)
    except RecursionError:
        raise BadLine(f"nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise BadLine("is not JSON") from None
    _check_tree(obj)
    return obj


def _check_tree(obj: Any) -> None:
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise BadLine(f"nests deeper than {MAX_DEPTH} levels")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(value, int) and not isinstance(value, bool):
            if not INT_RANGE[0] <= value <= INT_RANGE[1]:
                raise BadLine(f"holds the number {str(value)[:30]}..., past 64 bits")


def _types(obj: dict, spec: dict[str, tuple[Any, ...]], what: str) -> None:
    for key, kinds in spec.items():
        value = obj.get(key)
        if isinstance(value, bool) and bool not in kinds:
            value = object()
        if not isinstance(value, kinds):
            names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
            raise BadLine(f"a {what} whose '{key}' is not {names}")


STR, OPT_STR, OPT_INT = (str,), (str, type(None)), (int, type(None))
RUN_SPEC: dict[str, tuple[Any, ...]] = {
    "id": STR,
    "started_at": STR,
    "finished_at": OPT_STR,
    "state": STR,
    "host": OPT_STR,
    "command": STR,
    "suite": STR,
    "device": STR,
    "config": (dict, type(None)),
    "plan": (list, type(None)),
    "labels": (dict, type(None)),
    "environment_ids": (list, type(None)),
}
RESULT_SPEC: dict[str, tuple[Any, ...]] = {
    "run_id": STR,
    "case_version": OPT_INT,
    "stage": OPT_STR,
    "artifacts": (list, type(None)),
    "started_at": OPT_STR,
    "finished_at": OPT_STR,
    "ops": (list, type(None)),
}
NOTE_SPEC: dict[str, tuple[Any, ...]] = {
    "run_id": STR,
    "text": STR,
    "case": OPT_STR,
    "mode": OPT_STR,
    "author": OPT_STR,
    "created_at": OPT_STR,
}
ARTIFACT_SPEC: dict[str, tuple[Any, ...]] = {
    "run_id": STR,
    "path": STR,
    "sha256": OPT_STR,
    "bytes": OPT_INT,
}
ENVIRONMENT_SPEC: dict[str, tuple[Any, ...]] = {"id": STR, "data": (dict,)}
END_SPEC: dict[str, tuple[Any, ...]] = {"runs": (int,), "results": (int,)}


def check(obj: dict) -> dict:
    """``obj`` (a parsed line with a known kind) checked, as it is to be imported."""
    kind = obj["kind"]
    if kind == "run":
        _types(obj, RUN_SPEC, "run")
        if obj["state"] not in RUN_STATES:
            raise BadLine(f"a run in the unknown state {obj['state'][:40]!r}")
        for key in ("labels",):
            if any(not isinstance(v, str) for v in (obj.get(key) or {}).values()):
                raise BadLine(f"a run whose '{key}' are not all text")
        if any(not isinstance(e, str) for e in obj.get("environment_ids") or []):
            raise BadLine("a run whose 'environment_ids' are not all text")
        if obj["state"] == "running":  # its supervisor lived elsewhere: never live here
            obj = dict(obj, state="interrupted")
        if redact(obj["command"]) != obj["command"]:  # a database password on its command line
            obj = dict(obj, command=redact(obj["command"]))
    elif kind == "result":
        _types(obj, RESULT_SPEC, "result")
        if any(not isinstance(a, str) for a in obj.get("artifacts") or []):
            raise BadLine("a result whose 'artifacts' are not all paths")
        for op in obj.get("ops") or []:
            if not (
                isinstance(op, dict)
                and isinstance(op.get("op"), str)
                and isinstance(op.get("device"), str)
                and isinstance(op.get("count"), int)
                and not isinstance(op.get("count"), bool)
            ):
                raise BadLine("a result whose op table rows need op, device (text) and count")
        try:
            Result.from_dict(obj)
        except (MalformedResult, TypeError) as exc:
            raise BadLine(str(exc)) from None
    elif kind == "note":
        _types(obj, NOTE_SPEC, "note")
        if obj.get("mode") is not None and obj.get("case") is None:  # as the store refuses it
            raise BadLine("a note on a mode without its case")
    elif kind == "artifact":
        _types(obj, ARTIFACT_SPEC, "artifact")
    elif kind == "environment":
        _types(obj, ENVIRONMENT_SPEC, "environment")
    elif kind == "end":
        _types(obj, END_SPEC, "end line")
    return obj
