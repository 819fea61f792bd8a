"""Is this PostgreSQL database a torchport knowledge base, bring it to the code's schema, and
say in one line what a connection or server error means and what to do.

The schema version lives in a one-row table, ``torchport_schema`` (SQLite keeps it in the
file header). Migrations run in one transaction under an advisory lock and re-read the version
first, so two writers starting together on an empty database migrate it once. Reads never
migrate; they refuse a database with no knowledge base in it, another application's tables, a
newer schema, or an older one (naming ``torchport migrate``).
"""

from __future__ import annotations

import psycopg
from psycopg import errors

from torchport.kb import schema
from torchport.kb.base import NoWriteAccess, StoreError
from torchport.kb.sql_common import scrub

VERSION_TABLE = "torchport_schema"
MIGRATIONS = "migrations_pg"
FIRST_VERSION = 5  # the first version this engine wrote (tests build older bases from it on)
MIGRATION_LOCK = 0x74_6F_72_63  # pg_advisory_xact_lock key: b"torc"
FIX = "pass another --db, or run 'torchport run --db URL' on an empty database to start one"

TABLES = (
    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    f" AND tablename != '{VERSION_TABLE}'"
)
HAS_VERSION = (
    f"SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = '{VERSION_TABLE}'"
)
VERSION = f"SELECT version FROM {VERSION_TABLE}"


def migrations() -> list[tuple[int, str]]:
    return schema.migrations(MIGRATIONS)


def describe(conn: psycopg.Connection) -> tuple[int, set[str]]:
    """The schema version (0: none) and the tables of the connection's schema."""
    tables = {row[0] for row in conn.execute(TABLES)}
    if conn.execute(HAS_VERSION).fetchone() is None:
        return 0, tables
    row = conn.execute(VERSION).fetchone()
    return (int(row[0]) if row else 0), tables


def check_identity(where: str, version: int, tables: set[str], *, write: bool) -> None:
    schema.check_identity(where, version, tables, write=write, fix=FIX)


def migrate(conn: psycopg.Connection, where: str) -> int:
    """Bring the database to SCHEMA_VERSION; return the version it had. Every step commits
    together; the lock makes a second writer wait, then find nothing left to do."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        version, tables = describe(conn)
        check_identity(where, version, tables, write=True)
        if version < schema.SCHEMA_VERSION:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)")
            for number, script in migrations():
                if number > version:
                    conn.execute(script)  # no parameters: the simple protocol, many statements
            conn.execute(f"DELETE FROM {VERSION_TABLE}")
            conn.execute(
                f"INSERT INTO {VERSION_TABLE}(version) VALUES (%s)", (schema.SCHEMA_VERSION,)
            )
    return version


def explain_connect(exc: psycopg.Error, where: str, given: str = "") -> StoreError:
    """One line for a failed connection: what is wrong and the fix (never the password:
    ``where`` is the redacted URL, and the driver's words are scrubbed of ``given``'s)."""
    said = scrub(_first_line(exc), given) if given else _first_line(exc)
    if "password authentication failed" in said or "no password supplied" in said:
        return StoreError(
            f"PostgreSQL refused the login for {where} ({said}); check the user and the "
            "password (in the URL, PGPASSWORD or ~/.pgpass)"
        )
    if "does not exist" in said and "database" in said:
        return StoreError(
            f"{where}: {said}; create it (createdb, or CREATE DATABASE) or fix the name in --db"
        )
    if "role" in said and "does not exist" in said:
        return StoreError(f"{where}: {said}; create the role or fix the user in --db")
    if any(
        text in said
        for text in ("Connection refused", "No such file", "could not connect", "resolve host")
    ):
        return StoreError(
            f"cannot reach the PostgreSQL server of {where} ({said}); start the server or "
            "fix the host and port in --db"
        )
    return StoreError(f"cannot connect to {where} ({said}); check the URL given to --db")


def explain(exc: psycopg.Error, where: str) -> StoreError:
    """One line for an error on an open connection."""
    said = _first_line(exc)
    if isinstance(exc, errors.ReadOnlySqlTransaction):
        return StoreError(f"{where} was opened read-only ({said}); open it with write=True")
    if isinstance(exc, errors.InsufficientPrivilege):
        return NoWriteAccess(
            f"{where}: {said}; grant the user rights on the database, or pass another --db",
            said=said,
        )
    if isinstance(exc, (errors.UndefinedTable, errors.UndefinedColumn)):
        return StoreError(f"'{where}' is a damaged torchport knowledge base ({said}); {FIX}")
    if isinstance(exc, psycopg.OperationalError):
        return StoreError(
            f"lost the connection to {where} ({said}); check the server and run the command again"
        )
    return StoreError(f"{where}: {said}")


def _first_line(exc: psycopg.Error) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    # "connection failed: connection to server at ... failed: FATAL:  password ..." -> the end
    return line.rsplit("FATAL:", 1)[-1].strip()
