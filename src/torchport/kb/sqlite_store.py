"""The SQLite knowledge base: one file, a connection per thread, results committed one by one.

Read mode opens ``file:PATH?mode=ro`` with ``query_only``: it never creates, migrates or
switches the journal mode, and refuses a file that is not a torchport knowledge base before
SQLite opens it. Write mode checks an existing file (identity, integrity, writability) when it
is opened, so a run on a bad file fails before it records anything, and creates a new file only
at its first use, so bad input found after the open leaves no empty database behind.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

from torchport.kb import queries as q
from torchport.kb import sqlite_schema as schema
from torchport.kb.base import NoWriteAccess, StoreError
from torchport.kb.sql_common import guarded
from torchport.kb.sql_store import SQLStore
from torchport.records.globs import fnmatch_to_glob

BUSY_TIMEOUT_S = 30.0


class SQLiteStore(SQLStore):
    q = q
    driver_error = sqlite3.Error
    # A reading thread needs the Python lock back after every row SQLite steps: ahead of a
    # reader busy in Python it waits for it each time, and reading ahead costs more than it
    # saves (compare --json's pairs: 0.94 s read ahead, 0.72 s on the reader's thread).
    reads_ahead = False
    # The same for an export's lines (kb/reads/export.py _line_spans): read on the caller's
    # thread. On a thread of their own, two threads ahead, 100 000 results cost 0.3 s more of
    # CPU, half of it in the kernel, and ran no faster (CLI, 2 cores: 2.12 s -> 1.77 s median
    # under load).
    line_threads = 0

    def __init__(self, path: str, *, write: bool, check_tables: tuple[str, ...] | None = None):
        """``check_tables``: a writer that writes only these tables (and reads runs) checks
        their integrity alone on a file of the current schema, not every page."""
        self.path = self.url = str(path)
        self._check_tables = check_tables
        self.read_only = not write
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False
        self._found_version: int | None = None  # what a write open found (records/store.migrate)
        # (device, inode) of the file once opened for writing: every write checks that the
        # path still names it, so a file deleted or replaced under a run is noticed.
        self._identity: tuple[int, int] | None = None
        exists = schema.check_path(self.path, write=write)
        if self.read_only:
            # Refuse from the raw header first: SQLite never opens another application's file.
            schema.refuse_unless_torchport(self.path, schema.header_user_version(self.path))
            self._open_checked(write=False)
        elif exists and Path(self.path).stat().st_size > 0:
            if schema.is_read_only_file(self.path):
                raise NoWriteAccess(
                    f"'{self.path}' is read-only; make it writable (chmod u+w) or pass "
                    "another --db",
                    said="the file is read-only",
                )
            self._open_checked(write=True)

    # -- connections ---------------------------------------------------------------------------
    def _reopened(self) -> SQLiteStore:
        return SQLiteStore(self.path, write=False)

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"the store for '{self.path}' is closed")
        # Only the first, checked open may create the file: a later connection (the heartbeat's
        # thread) must never re-create a path that was deleted under the run.
        mode = "ro" if self.read_only else ("rw" if self._identity else "rwc")
        uri = f"{Path(self.path).absolute().as_uri()}?mode={mode}"
        try:
            conn = sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlite3.Row
            conn.execute(q.QUERY_ONLY_ON if self.read_only else q.FOREIGN_KEYS_ON)
            schema.register_functions(conn)
        except sqlite3.Error as exc:
            raise schema.explain(exc, self.path) from None
        with self._lock:
            self._conns.append(conn)
        return conn

    def _borrow(self) -> sqlite3.Connection:
        """A new connection for one read on another thread (SQLite connects in microseconds:
        none is kept spare)."""
        return self._connect()

    def _lend_back(self, conn: sqlite3.Connection) -> None:
        self._forget(conn)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if not self.read_only and not self._ready:
                self._open_checked(write=True)
            conn = self._local.conn = self._connect()
        return conn

    def _open_checked(self, *, write: bool) -> None:
        """Identity and integrity checks, then (write) migrations and WAL, once per store."""
        with self._lock:
            if self._ready:
                return
        conn = self._connect()
        try:
            version, tables = schema.describe(conn)
            schema.check_identity(self.path, version, tables, write=write)
            if write:
                if tables:
                    current = version == schema.SCHEMA_VERSION  # else a migration rewrites
                    only = self._check_tables if current and self._check_tables else None
                    schema.check_integrity(conn, self.path, only)
                self._found_version = schema.migrate(conn, self.path)
                conn.execute(q.SET_WAL)  # readers never wait on the writer
        except sqlite3.Error as exc:
            raise schema.explain(exc, self.path) from None
        finally:
            self._forget(conn)
        if write:
            self._identity = self._file_identity()
        self._ready = True

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            info = Path(self.path).stat()
        except OSError:
            return None
        return info.st_dev, info.st_ino

    def _check_same_file(self) -> None:
        """StoreError when the path no longer names the file this store opened."""
        if self._identity is not None and self._file_identity() != self._identity:
            what = "deleted" if not Path(self.path).exists() else "replaced by another file"
            raise StoreError(
                f"the knowledge base '{self.path}' was {what} while torchport was writing to "
                "it; nothing more is recorded and the run is not complete: restore the file "
                "and --resume the run, or start it again"
            )

    def _writer(self) -> sqlite3.Connection:
        if self.read_only:
            raise StoreError(f"'{self.path}' was opened read-only; open it with write=True")
        conn = self._conn()
        self._check_same_file()
        return conn

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection):
        if conn.in_transaction:  # inside ``store._all_or_none()``: the outer one commits
            yield conn
            return
        conn.execute(q.BEGIN_IMMEDIATE)
        try:
            yield conn
        except BaseException:
            conn.execute(q.ROLLBACK)
            raise
        conn.execute(q.COMMIT)

    def _stream(self, sql: str, args, *, plain: bool = False):
        """An SQLite cursor steps row by row; ``plain``: rows as tuples (no sqlite3.Row)."""
        if not plain:
            return self._conn().execute(sql, args)
        cursor = self._conn().cursor()
        cursor.row_factory = None
        return cursor.execute(sql, args)

    def _rows(self, conn: sqlite3.Connection, sql: str, args) -> list[tuple]:
        """All of a statement's rows on ``conn``, as tuples (no sqlite3.Row)."""
        cursor = conn.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, args).fetchall()

    def _insert_id(self, conn: sqlite3.Connection, sql: str, args) -> int:
        return int(conn.execute(sql, args).lastrowid or 0)

    def _executemany(self, conn: sqlite3.Connection, sql: str, rows: list) -> None:
        conn.executemany(sql, rows)

    def _explain(self, exc: Exception) -> StoreError:
        assert isinstance(exc, sqlite3.Error)
        return schema.explain(exc, self.path)

    def _is_unique_violation(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in str(exc)

    def _is_refused_json(self, exc: Exception) -> bool:
        return False  # json_valid reads 0 for any text

    @staticmethod
    def _glob(pattern: str) -> tuple[str, bool]:
        return fnmatch_to_glob(pattern)

    @staticmethod
    def _fts_query(text: str) -> str | None:
        """Every word must match, as a whole word, or as a prefix when it ends with ``*``.
        Words are quoted, so user text is never FTS5 syntax. (Prefixes are opt-in: a prefix
        query reads every posting of every word it covers, 100 000s for a common one.)"""
        terms = []
        # Control characters (a NUL ends an FTS5 string early) separate words, as spaces do.
        text = "".join(ch if ch.isprintable() else " " for ch in text.replace('"', " "))
        for raw in text.split():
            word = raw.rstrip("*")
            if word:
                terms.append(f'"{word}"' + ("*" if raw.endswith("*") else ""))
        return " ".join(terms) if terms else None

    @guarded
    def schema_version(self) -> int:
        return self._conn().execute(q.USER_VERSION).fetchone()[0]
