"""Is this file a torchport knowledge base, and bring it to the code's schema.

Checks run before SQLite writes anything: a path that is not a regular file, a file that is not
SQLite, another application's database, a newer schema or a damaged one are refused with one
line. Reads never migrate: they read the current schema only and refuse an older one with the
command that upgrades it (``torchport migrate``); a write store migrates the file it opens.
Migrations run in one ``BEGIN IMMEDIATE`` transaction that re-reads ``user_version`` first, so
two processes starting together on a new file migrate it once.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from torchport.kb import queries as q
from torchport.kb import schema
from torchport.kb.base import NoWriteAccess, StoreError
from torchport.kb.schema import SCHEMA_VERSION
from torchport.records.figures import metric_value
from torchport.records.signature import error_signature

HEADER_MAGIC = b"SQLite format 3\x00"
USER_VERSION_OFFSET = 60  # big-endian u32 in the 100-byte file header
__all__ = ["SCHEMA_VERSION", "migrations", "statements"]


def migrations() -> list[tuple[int, str]]:
    return schema.migrations("migrations")


FIX = "pass another --db, or 'torchport run --db NEW.db' to start a knowledge base"


def check_path(path: str, *, write: bool) -> bool:
    """Refuse paths SQLite must not touch; return whether the file exists."""
    p = Path(path)
    if p.is_dir():
        raise StoreError(f"'{path}' is a directory, not a database file; pass a file path to --db")
    if p.exists():
        if not p.is_file():
            raise StoreError(f"'{path}' is not a regular file; pass a database file to --db")
        return True
    if not write:
        raise StoreError(
            f"no knowledge base at '{path}'; run 'torchport run --db {path}' first "
            "or pass the right --db"
        )
    parent = p.absolute().parent
    if not parent.is_dir():
        raise StoreError(f"folder '{parent}' does not exist; create it or pass another --db")
    return False


def header_user_version(path: str) -> int | None:
    """The schema version in the file header, None for an empty file; refuses non-SQLite."""
    with open(path, "rb") as f:
        head = f.read(100)
    if not head:
        return None
    if len(head) < 100 or not head.startswith(HEADER_MAGIC):
        raise StoreError(f"'{path}' is not an SQLite database (file is not a database); {FIX}")
    return int.from_bytes(head[USER_VERSION_OFFSET : USER_VERSION_OFFSET + 4], "big")


def refuse_unless_torchport(path: str, header_version: int | None) -> None:
    """For reads: refuse an empty or foreign file from its header alone (SQLite never opens it,
    so not even a WAL side file appears next to another application's database)."""
    if header_version is None or header_version == 0:
        what = (
            "an empty file"
            if header_version is None
            else "an SQLite file without torchport's schema"
        )
        raise StoreError(f"'{path}' is not a torchport knowledge base ({what}); {FIX}")


def is_read_only_file(path: str) -> bool:
    """No write bit at all counts as read-only even for root: the owner marked it so."""
    mode = os.stat(path).st_mode
    return not (mode & 0o222) or not os.access(path, os.W_OK)


def describe(conn: sqlite3.Connection) -> tuple[int, set[str]]:
    """The schema version and the tables, read from one snapshot: another process may commit
    a migration between two separate reads (version 0, yet the tables)."""
    own = not conn.in_transaction
    if own:
        conn.execute(q.BEGIN)
    try:
        version = conn.execute(q.USER_VERSION).fetchone()[0]
        tables = {row[0] for row in conn.execute(q.TABLES)}
    finally:
        if own:
            conn.execute(q.COMMIT)
    return version, tables


def check_identity(path: str, version: int, tables: set[str], *, write: bool) -> None:
    schema.check_identity(path, version, tables, write=write, fix=FIX)


def check_integrity(
    conn: sqlite3.Connection, path: str, tables: tuple[str, ...] | None = None
) -> None:
    """SQLite's quick check of the whole file, or of ``tables`` and their indexes only (a
    writer that touches nothing else: a note on a million-result file checked every page,
    1.1 s; its own tables take milliseconds). A table that does not exist is left out."""
    if tables is None:
        verdicts = [conn.execute(q.QUICK_CHECK).fetchone()[0]]
    else:
        have = {row[0] for row in conn.execute(q.ALL_TABLES)}
        verdicts = [conn.execute(q.quick_check_table(t)).fetchone()[0] for t in tables if t in have]
    verdict = next((v for v in verdicts if v != "ok"), "ok")
    if verdict != "ok":
        # The report opens with a "*** in database main ***" header; the finding follows.
        found = [line for line in verdict.splitlines() if not line.startswith("***")]
        raise StoreError(
            f"'{path}' is damaged ({(found or [verdict])[0][:120]}); restore it "
            f"from a copy, or move it aside and {FIX}"
        )


def statements(script: str) -> list[str]:
    """Split a migration into statements (triggers' bodies hold ';' too)."""
    out, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    if pending.strip() and not all(
        line.strip().startswith("--") or not line.strip() for line in pending.splitlines()
    ):
        raise ValueError(f"unterminated statement in a migration: {pending[:80]!r}")
    return out


def register_functions(conn: sqlite3.Connection) -> None:
    """SQL functions the schema uses (migration 0003 fills ``signature`` with this one, and
    reads of an older file group failures with it; a compared figure that is not a key
    figure is read out of ``metrics`` with ``torchport_metric``)."""
    conn.create_function("torchport_signature", 2, error_signature, deterministic=True)
    conn.create_function("torchport_metric", 2, metric_value, deterministic=True)


def migrate(conn: sqlite3.Connection, path: str) -> int:
    """Bring the file to SCHEMA_VERSION; return the version it had. Race-free across processes:
    the version is read again under the write lock, and every step commits together."""
    register_functions(conn)
    conn.execute(q.BEGIN_IMMEDIATE)
    try:
        version, tables = describe(conn)
        check_identity(path, version, tables, write=True)
        for number, script in migrations():
            if number > version:
                for statement in statements(script):
                    conn.execute(statement)
                conn.execute(q.set_user_version(number))
        conn.execute(q.COMMIT)
    except BaseException:
        conn.execute(q.ROLLBACK)
        raise
    return version


# SQLite's primary result codes (sqlite3.h) for what a user can act on.
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT = 5, 6, 8, 10, 11
_SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 13, 14, 26


def explain(exc: sqlite3.Error, path: str) -> StoreError:
    """One line for an SQLite error on ``path``: the problem, SQLite's words, and the fix."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if primary == _SQLITE_NOTADB or "not a database" in said:
        return StoreError(f"'{path}' is not an SQLite database ({said}); {FIX}")
    if primary == _SQLITE_CORRUPT or "malformed" in said:
        return StoreError(
            f"'{path}' is damaged ({said}); restore it from a copy, or move it aside and {FIX}"
        )
    if primary == _SQLITE_READONLY or "readonly" in said:
        return NoWriteAccess(
            f"'{path}' is read-only ({said}); make it and its folder writable or pass another --db",
            said=said,
        )
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return StoreError(
            f"'{path}' stayed locked by another process ({said}); retry when it is done"
        )
    if primary == _SQLITE_CANTOPEN:
        return StoreError(
            f"cannot open '{path}' ({said}); check the path and its folder's permissions"
        )
    if primary in (_SQLITE_FULL, _SQLITE_IOERR):
        return StoreError(f"cannot write '{path}' ({said}); free disk space or pass another --db")
    if "no such table" in said or "no such column" in said:
        return StoreError(
            f"'{path}' is a damaged torchport knowledge base ({said}); move it aside and {FIX}"
        )
    return StoreError(f"'{path}': {said}")
