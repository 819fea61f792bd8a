"""``open_store``: the one way to a knowledge base, by URL, for reading or for writing."""

from __future__ import annotations

import os
from dataclasses import dataclass

from torchport.kb.base import NoWriteAccess, OlderSchema, Store, StoreError, default_db_path
from torchport.kb.schema import SCHEMA_VERSION, migrate_command

# URL schemes of the PostgreSQL engine (the last is SQLAlchemy's spelling).
PG_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def open_store(
    url: str | os.PathLike | None = None,
    *,
    write: bool,
    check_tables: tuple[str, ...] | None = None,
) -> Store:
    """Open the knowledge base at ``url``: a path or ``sqlite:///path`` (default
    ``default_db_path()``), or ``postgresql://user@host/db`` (a server a team shares; the
    driver comes with ``pip install 'torchport[postgres]'``).

    ``write=False`` never creates, migrates or changes the database and refuses anything that
    is not a torchport knowledge base; ``write=True`` creates (SQLite: the file at its first
    write) and migrates it. Every problem is a StoreError with one line that names the fix.
    ``check_tables``: a writer that writes only these tables checks them alone (SQLite).
    """
    url = os.fspath(url) if url is not None else default_db_path()
    if not url:
        raise StoreError("empty database path; pass --db PATH")
    if url.startswith(PG_SCHEMES):
        return _open_pg(url, write=write)
    if "://" in url and not url.startswith("sqlite:///"):
        scheme = url.split("://", 1)[0]
        raise StoreError(
            f"database URL scheme '{scheme}' is not supported; use a file path, "
            "sqlite:///path or postgresql://user@host/db"
        )
    from torchport.kb.sqlite_store import SQLiteStore

    return SQLiteStore(url.removeprefix("sqlite:///"), write=write, check_tables=check_tables)


def _open_pg(url: str, *, write: bool) -> Store:
    try:
        import psycopg  # noqa: F401  (the engine's driver: an optional extra)
    except ImportError:
        raise StoreError(
            "a postgresql:// knowledge base needs the PostgreSQL driver; install "
            "torchport[postgres] (pip install 'torchport[postgres]')"
        ) from None
    from torchport.kb.pg_store import PGStore

    return PGStore(url, write=write)


@dataclass(frozen=True)
class Migration:
    """What ``migrate`` did: the knowledge base (its URL without a password) and its schema
    version before and after (equal: it was current, and nothing was changed)."""

    where: str
    before: int
    after: int


def migrate(url: str | os.PathLike | None = None) -> Migration:
    """``torchport migrate``: bring the knowledge base at ``url`` (as ``open_store``) of an older
    schema to this torchport's, in one transaction. A current one is only read (nothing
    changes); a newer, foreign, damaged or missing one is refused as a read refuses it; a
    user who may not change it (a read-only file, a PostgreSQL role without the rights) gets
    one line that names the command for whoever can."""
    try:
        with open_store(url, write=False) as store:
            return Migration(store.url, SCHEMA_VERSION, SCHEMA_VERSION)
    except OlderSchema as older:
        try:
            with open_store(url, write=True) as store:  # a write store migrates as it opens
                # the version it found under the write lock: another migrate may have been first
                found = getattr(store, "_found_version", None)
                return Migration(
                    store.url, older.version if found is None else found, SCHEMA_VERSION
                )
        except NoWriteAccess as exc:
            raise StoreError(
                f"cannot migrate '{older.where}' from schema v{older.version} to "
                f"v{SCHEMA_VERSION}: this user may not change it ({exc.said}); run "
                f"'{migrate_command(older.where)}' as a user who can"
            ) from None
