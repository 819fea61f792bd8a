"""What every engine's schema shares: the numbered migrations, the tables each version adds,
and the identity checks that refuse another application's database or a newer schema.

Each engine keeps its migrations in its own SQL dialect, numbered alike (``migrations/`` for
SQLite, ``migrations_pg/`` for PostgreSQL); ``tests/store/test_pg_schema.py`` holds the two
to the same tables, columns and indexes at every version.
"""

from __future__ import annotations

import shlex
from importlib import resources

from torchport.kb.base import OlderSchema, StoreError

# Tables each schema version adds (SQLite's FTS shadow tables are not checked).
TABLES_BY_VERSION = {
    1: {"environments", "runs", "results", "result_ops", "results_fts"},
    2: {"run_environments"},
    3: {"notes", "notes_fts", "artifacts"},
}


def migrations(folder: str = "migrations") -> list[tuple[int, str]]:
    """(number, SQL) of every migration in ``folder`` of this package, in order."""
    entries = (resources.files("torchport.kb") / folder).iterdir()
    found = [
        (int(entry.name.split("_", 1)[0]), entry.read_text())
        for entry in entries
        if entry.name.endswith(".sql")
    ]
    return sorted(found)


SCHEMA_VERSION = max(number for number, _ in migrations())


def migrate_command(where: str) -> str:
    """The command that brings ``where`` to this torchport's schema, as a user types it."""
    return f"torchport migrate --db {shlex.quote(where)}"


def check_identity(where: str, version: int, tables: set[str], *, write: bool, fix: str) -> None:
    """Refuse a database that is not a torchport knowledge base (or not yet one, for a read),
    a newer schema, a damaged one, or (read) an older one: reads read the current schema only,
    and name the one command that upgrades it (OlderSchema). ``fix`` ends every other line:
    how to point at or start a knowledge base."""
    if tables and not tables & TABLES_BY_VERSION[1]:
        listed = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise StoreError(
            f"'{where}' is not a torchport knowledge base (another application's "
            f"database (tables: {listed})); {fix}"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"'{where}' has schema v{version}, newer than this torchport's "
            f"v{SCHEMA_VERSION}; upgrade torchport to use it"
        )
    if version == 0 and not tables:
        if write:
            return  # empty: ours to set up
        raise StoreError(f"'{where}' is not a torchport knowledge base (empty); {fix}")
    expected = set().union(*(t for v, t in TABLES_BY_VERSION.items() if v <= max(version, 1)))
    missing = sorted(expected - tables)
    if missing or version == 0:
        what = f"missing table {', '.join(missing)}" if missing else "no schema version"
        raise StoreError(
            f"'{where}' is a damaged torchport knowledge base ({what}); move it aside and {fix}"
        )
    if not write and version < SCHEMA_VERSION:
        raise OlderSchema(
            f"'{where}' has schema v{version}, older than this torchport's v{SCHEMA_VERSION}; "
            f"bring it up to date with '{migrate_command(where)}' (reads never change it)",
            where=where,
            version=version,
        )
