"""``open_store``: the one way to a knowledge base, by URL, for reading or for writing."""

from __future__ import annotations

import os

from torchport.records.base import Store, StoreError, default_db_path
from torchport.records.schema import SCHEMA_VERSION  # noqa: F401  (re-exported)


def open_store(url: str | os.PathLike | None = None, *, write: bool) -> Store:
    """Open the knowledge base at ``url`` (a path or ``sqlite:///path``; default
    ``default_db_path()``).

    ``write=False`` never creates, migrates or changes the file and refuses anything that is
    not a torchport knowledge base; ``write=True`` creates the file at its first write and
    migrates it. Every problem is a StoreError with one line that names the fix.
    """
    url = os.fspath(url) if url is not None else default_db_path()
    if not url:
        raise StoreError("empty database path; pass --db PATH")
    if "://" in url and not url.startswith("sqlite:///"):
        scheme = url.split("://", 1)[0]
        raise StoreError(
            f"database URL scheme '{scheme}' is not supported yet; "
            "use a file path or sqlite:///path"
        )
    from torchport.records.sqlite_store import SQLiteStore

    return SQLiteStore(url.removeprefix("sqlite:///"), write=write)
