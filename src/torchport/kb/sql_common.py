"""What both SQL engines share below the store: the error guard, JSON columns, the op table
rows, the host-op column, a run's liveness and a URL fit to print."""

from __future__ import annotations

import functools
import json
import os
import queue
import re
import socket
import threading
import weakref
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from torchport.kb.base import StoreError
from torchport.records.result import MalformedResult

JSON_COLUMNS = {
    "metrics": dict,
    "findings": dict,
    "durations": dict,
    "artifacts": list,
    "probe_versions": dict,
}
# A live supervisor writes its run's heartbeat this often; a run from another host whose
# heartbeat is older than STALE_AFTER_S is taken as dead (a pid there cannot be checked).
HEARTBEAT_S = 10.0
STALE_AFTER_S = 60.0
# The password runs to the last '@' of the URL (a password may hold '/', ':' or '@').
_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/:@\s]*):\S*@", re.IGNORECASE)
# libpq also takes the password (and a client key's) as a query parameter of the URL.
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:ssl)?password=)[^&#\s]*", re.IGNORECASE)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def redact_url(url: str) -> str:
    """One URL (the whole of ``url``, whatever bytes its password holds, spaces and newlines
    included) without its password: everything between the user's ':' and the URL's last
    '@' goes, and every ``?password=`` value."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        info, _, host = rest.rpartition("@")
        url = f"{scheme}://{info.split(':', 1)[0]}@{host}"
    return redact(url)


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's message about ``url``) with no part of ``url``'s password: the
    password as given and percent-decoded, and every quoted token the driver cut from it (a
    bad percent escape, or a '/' in it read as the end of the host, puts a piece in quotes)."""
    from urllib.parse import unquote

    scheme, sep, rest = url.partition("://")
    info = rest.rpartition("@")[0] if sep else ""
    secret = info.split(":", 1)[1] if ":" in info else ""
    text = redact(text.replace(url, redact_url(url)))
    if not secret:
        return text
    for form in sorted({secret, unquote(secret, errors="replace")}, key=len, reverse=True):
        text = text.replace(form, "***")

    k = min(3, len(secret))
    pieces = {secret[i : i + k] for i in range(len(secret) - k + 1)}

    def piece(match: re.Match) -> str:
        token = match.group(2)
        return "'***'" if any(p in token for p in pieces) else match.group(0)

    # A token cut short by a newline in the password ends at the line's end.
    return re.sub(r"([\"'])((?:(?!\1)[^\n])*)(?:\1|$)", piece, text, flags=re.MULTILINE)


def redact(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` in it removed, and
    the value of every ``?password=`` (or ``&sslpassword=``) parameter replaced by ``***``,
    so a URL can be printed and a command line recorded."""
    return _QUERY_PASSWORD.sub(r"\g<head>***", _PASSWORD.sub(r"\g<head>@", text))


AHEAD_CHUNKS = 4  # chunks a read-ahead holds ready for its reader
_END = object()


def read_ahead(chunks: Callable[[], Iterator[list]]) -> Iterator[Any]:
    """The rows of ``chunks()`` (an iterator of row lists), made on a thread of their own,
    started now, up to AHEAD_CHUNKS chunks ahead of the reader: the database steps the next
    rows while the caller works (SQLite and psycopg let go of the GIL while the database works,
    and a PostgreSQL server is a process of its own). An error on that thread is raised to the
    reader; a reader that stops early, or never reads, stops the thread (which closes what it
    opened)."""
    ready: queue.Queue = queue.Queue(maxsize=AHEAD_CHUNKS)
    stop = threading.Event()

    def offer(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for rows in chunks():
                if not offer(rows):
                    return
        except BaseException as exc:  # raised again on the reader's thread
            offer(exc)
            return
        offer(_END)

    thread = threading.Thread(target=produce, name="torchport-read-ahead", daemon=True)
    thread.start()

    def rows() -> Iterator[Any]:
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield from item
        finally:
            stop.set()
            thread.join()

    reader = rows()
    weakref.finalize(reader, stop.set)  # dropped before its first row: the thread ends too
    return reader


def guarded(method):
    """Every driver error leaves the store as a one-line StoreError (the engine says which
    errors are its driver's and how each reads: ``driver_error``, ``_store_error``)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except self.driver_error as exc:
            raise self._store_error(exc, method.__name__, args) from None

    return wrapper


def missing_run(url: str, run_id: str, latest: str | None) -> StoreError:
    """The one line for a run id ``url`` does not hold (``latest``: its newest run's id)."""
    hint = f" (latest is {latest}; 'torchport runs' lists all)" if latest else ""
    return StoreError(f"no run '{run_id}' in {url}{hint}")


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


# In the ``host_ops`` column, beside the ops: op -> its evidence class (probes/placement.py),
# so that ``compare`` ranks host-op changes by class without reading the findings. Rows stored
# before it (migration 0004 filled them from fallback_ops alone) have no such key.
HOST_OP_CLASSES = "~classes"


def host_ops_text(findings: dict) -> str | None:
    """findings' fallback_ops as stored in the ``host_ops`` column (None when none), in the
    form SQLite's json_extract gives (sorted keys, no spaces), as migration 0004 filled it,
    with each op's evidence class under ``HOST_OP_CLASSES`` where findings["host_ops"] has it."""
    ops = findings.get("fallback_ops")
    if not ops:
        return None
    classes = host_op_classes(findings.get("host_ops"), ops)
    value = {**ops, HOST_OP_CLASSES: classes} if classes else ops
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError) as exc:
        raise MalformedResult(f"findings['fallback_ops'] cannot be stored: {exc}") from None


def host_op_classes(host_ops, ops) -> dict[str, str]:
    """op -> evidence class, for the ops in ``ops``, from findings["host_ops"] rows."""
    if not isinstance(host_ops, list):
        return {}
    return {
        str(h["op"]): str(h["evidence_class"])
        for h in host_ops
        if isinstance(h, dict) and h.get("evidence_class") and h.get("op") in ops
    }


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def heartbeat_age_s(heartbeat_at: str) -> float:
    try:
        then = datetime.fromisoformat(heartbeat_at)
    except ValueError:
        return float("inf")  # unreadable: no proof of life
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)  # written by hand: read as UTC, as ours are
    return (datetime.now(timezone.utc) - then).total_seconds()


def supervisor_alive(pid: int | None, host: str | None, heartbeat_at: str | None) -> bool:
    """Whether a ``running`` run's supervisor may still be going. On this host its pid says;
    from another host, its heartbeat (fresh: alive; stale: dead). A run from another host
    recorded without a heartbeat (before schema v5) keeps its stored state."""
    if pid and host == socket.gethostname():
        return pid_alive(pid)
    if heartbeat_at:
        return heartbeat_age_s(heartbeat_at) < STALE_AFTER_S
    return True


def note_dict(row) -> dict:
    return {
        "id": row["id"],
        "run_id": row["run_id"],
        "case": row["case_id"],
        "mode": row["mode"],
        "author": row["author"],
        "text": row["text"],
        "created_at": row["created_at"],
    }
