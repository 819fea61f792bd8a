"""What the SQLite store's modules share: the error guard, JSON columns, the op table rows."""

from __future__ import annotations

import functools
import json
import sqlite3
from datetime import datetime, timezone
from typing import Any

from torchport.records import sqlite_schema as schema
from torchport.records.base import DuplicateResult, StoreError
from torchport.records.result import MalformedResult

JSON_COLUMNS = {
    "metrics": dict,
    "findings": dict,
    "durations": dict,
    "artifacts": list,
    "probe_versions": dict,
}
# Methods whose UNIQUE failure means "this (case, mode) is already recorded in the run".
_ADDS_RESULTS = ("add_result", "add_results")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def guarded(method):
    """Every SQLite error leaves the store as a one-line StoreError naming the file."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" in str(exc) and method.__name__ in _ADDS_RESULTS:
                raise DuplicateResult(
                    f"run {args[0]} already has a result for this (case, "
                    "mode); resume records only what is missing"
                ) from None
            if "UNIQUE" in str(exc) and method.__name__ == "put_run":
                raise StoreError(f"run {args[0].get('id')} is already in '{self.path}'") from None
            raise schema.explain(exc, self.path) from None
        except sqlite3.Error as exc:
            raise schema.explain(exc, self.path) from None

    return wrapper


def to_json(value: Any, name: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:  # mixed key types, a cycle
        raise MalformedResult(f"{name} cannot be stored as JSON: {exc}") from None


def op_rows(ops: Any) -> list[tuple[str, str, int, int]]:
    if not ops:
        return []
    try:
        return [
            (str(o["op"]), str(o["device"]), int(o["count"]), int(bool(o.get("fallback"))))
            for o in ops
        ]
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise MalformedResult(f"op table entries need op, device and count: {exc!r}") from None
