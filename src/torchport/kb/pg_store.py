"""The PostgreSQL knowledge base: one server for a team, every machine writing to it.

A connection per thread (and per process), autocommit, each write in its own transaction; a
read-only store's connections refuse writes in the server as well (``default_transaction_
read_only``). A write store migrates the database when it opens it; a read-only one refuses a
database with no knowledge base in it. Long reads are streamed through a server-side cursor
on a connection of their own (or inside the open transaction, which they must see), so no
command holds every result in memory. The URL is kept and printed without its password.
"""

from __future__ import annotations

import contextlib
import re
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import errors
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from torchport.kb import pg_schema
from torchport.kb.base import StoreError
from torchport.kb.pg_queries import Statements
from torchport.kb.sql_common import guarded, redact_url
from torchport.kb.sql_store import SQLStore
from torchport.records.globs import fnmatch_to_like

CONNECT_TIMEOUT_S = 10
STREAM_ROWS = 2000  # rows per round trip of a streamed read
SPARE_CONNECTIONS = 4  # connections kept open for the next read apart (KnowledgeBase parts)
# A comparison's statement keeps its pairs (materialized CTEs, 100 000 rows of two runs) in
# memory: with the server's default 4 MB they were written to temporary files and read back
# by each list's scan (EXPLAIN ANALYZE: 15% of the statement).
COMPARE_WORK_MEM = "64MB"
_WORD = re.compile(r"[^\W_]+")  # what migrations_pg's torchport_words keeps: letters, digits


class Row(tuple):
    """A row read by position (``row[0]``, slices) or by column name (``row["id"]``), and
    ``dict(row)``: what SQLite's ``sqlite3.Row`` gives the shared code."""

    names: dict[str, int]

    def __new__(cls, values, names: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row.names = names
        return row

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names[key])
        return tuple.__getitem__(self, key)

    def keys(self):
        return self.names.keys()


def _row_factory(cursor: Any):
    names: dict[str, int] = {}
    for i, column in enumerate(cursor.description or ()):
        names.setdefault(column.name, i)
    return lambda values: Row(values, names)


def _thread_ended(store: weakref.ref, conn: psycopg.Connection) -> None:
    """A thread's connection once the thread has ended: lent back to its store (closed if the
    store is gone)."""
    if (owner := store()) is not None:
        owner._lend_back(conn)
    else:
        conn.close()


def libpq_url(url: str) -> str:
    """``postgresql+psycopg://`` (SQLAlchemy's spelling) as libpq reads it."""
    return re.sub(r"^postgresql\+psycopg://", "postgresql://", url)


class PGStore(SQLStore):
    q = Statements()
    driver_error = psycopg.Error
    # The server finds the next rows in its own process while this one works on these.
    reads_ahead = True

    def __init__(self, url: str, *, write: bool):
        self._dsn = libpq_url(url)
        self.url = redact_url(url)
        self._given_url = url  # only to scrub a driver's message of its password
        self.read_only = not write
        self._local = threading.local()
        self._conns: list[psycopg.Connection] = []
        self._spare: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._found_version: int | None = None  # what a write open found (records/store.migrate)
        conn = self._conn()
        try:
            if write:
                self._found_version = pg_schema.migrate(conn, self.url)
            else:
                version, tables = pg_schema.describe(conn)
                pg_schema.check_identity(self.url, version, tables, write=False)
        except psycopg.Error as exc:
            self.close()
            raise pg_schema.explain(exc, self.url) from None
        except StoreError:
            self.close()
            raise

    def _reopened(self) -> PGStore:
        return PGStore(self._dsn, write=False)

    # -- connections ---------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection:
        if self._closed:
            raise StoreError(f"the store for {self.url} is closed")
        options: dict[str, Any] = {
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": "torchport",
        }
        # No JIT: its compile of a comparison's expressions took 1.3-2 s on a statement that
        # runs in a fraction of that (EXPLAIN ANALYZE on 100 000-result runs); torchport's
        # statements are short and planned afresh, which JIT never pays back.
        settings = ["-c jit=off"]
        if self.read_only:
            settings.append("-c default_transaction_read_only=on")
        options["options"] = " ".join(settings)
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, row_factory=_row_factory, **options)
        except psycopg.Error as exc:
            raise pg_schema.explain_connect(exc, self.url, self._given_url) from None
        with self._lock:
            self._conns.append(conn)
        return conn

    def _conn(self) -> psycopg.Connection:
        """This thread's connection: a spare one where there is one. It is lent back when the
        thread has ended (a server's worker threads come and go: an AnyIO worker ends after
        10 s idle, a test client's with each request), not left open until the store closes."""
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.broken or conn.closed:  # a server restart: connect again
            if conn is not None:
                self._forget(conn)
            conn = self._local.conn = self._borrow()
            thread = threading.current_thread()
            if thread is not threading.main_thread():  # which ends with the process
                weakref.finalize(thread, _thread_ended, weakref.ref(self), conn).atexit = False
        return conn

    def _borrow(self) -> psycopg.Connection:
        """A spare connection (one a read apart lent back) or a new one: a page's parts and
        read-aheads connect once per store, not once per read (a connection and its server
        process's first plan cost ~12 ms)."""
        with self._lock:
            while self._spare:
                conn = self._spare.pop()
                if not (conn.closed or conn.broken):
                    return conn
        return self._connect()

    def _lend_back(self, conn: psycopg.Connection) -> None:
        """Kept spare when it is sound and out of any transaction (up to SPARE_CONNECTIONS),
        else closed."""
        idle = (
            not (conn.closed or conn.broken)
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        with self._lock:
            if idle and not self._closed and len(self._spare) < SPARE_CONNECTIONS:
                self._spare.append(conn)
                return
        self._forget(conn)

    def close(self) -> None:
        with self._lock:
            self._spare = []
        super().close()

    def _writer(self) -> psycopg.Connection:
        if self.read_only:
            raise StoreError(f"{self.url} was opened read-only; open it with write=True")
        return self._conn()

    @contextlib.contextmanager
    def _transaction(self, conn: psycopg.Connection):
        if conn.info.transaction_status != TransactionStatus.IDLE:
            yield conn  # inside ``store._all_or_none()``: the outer one commits
            return
        with conn.transaction():
            yield conn

    def _stream(self, sql: str, args, *, plain: bool = False) -> Iterator[Row]:
        """Rows through a server-side cursor, STREAM_ROWS at a time. Inside an open
        transaction on this thread's connection (an import), there, to see its writes;
        else on a connection of its own, so other queries can run while it is read.
        ``plain``: rows as tuples (no Row made a row)."""
        conn = self._conn()
        own = conn.info.transaction_status == TransactionStatus.IDLE
        if own:
            conn = self._borrow()
        rows: dict[str, Any] = {"row_factory": tuple_row} if plain else {}
        try:
            with conn.transaction(), conn.cursor(name=f"stream_{id(args)}", **rows) as cur:
                cur.itersize = STREAM_ROWS
                cur.execute(sql, args)
                yield from cur
        finally:
            if own:
                self._lend_back(conn)

    def _chunks(self, sql: str, args, *, joined: bool = False) -> Iterator[list]:
        """Plain rows of ``sql`` through a server-side cursor, STREAM_ROWS at a time, on a
        connection of their own (a read-ahead's thread, sql_common.read_ahead), lent back
        when they end. Read in binary: 37 000 pairs of 33 columns took 0.30 s to parse from
        text and 0.17 s from binary (the same Python values: int, float, str, None).
        ``joined``: two runs' pairs, planned as ``_compare_rows`` plans them."""
        conn = self._borrow()
        try:
            with (
                conn.transaction(),
                conn.cursor(name="read_ahead", row_factory=tuple_row, binary=True) as cur,
            ):
                if joined:
                    self._comparing(conn)
                cur.itersize = STREAM_ROWS
                cur.execute(sql, args)
                while rows := cur.fetchmany(STREAM_ROWS):
                    yield rows
        finally:
            self._lend_back(conn)

    @staticmethod
    def _comparing(conn: psycopg.Connection) -> None:
        """Inside a transaction: two runs' pairs are joined by key without a hash join (the
        planner would hash one run's outcomes to find the other's, where merging the two runs'
        outcomes index scans, which hold them in key order, sorts nothing), a statement's
        pairs are kept in memory (COMPARE_WORK_MEM), and no statement is planned with parallel
        workers: a comparison is already spread over connections, a part a core and its
        counts apart, and a worker is one more process to start on those cores (compare
        --json in-process on 2 cores: 0.58 s without, 0.66 s with in a first interleaved
        round; within the noise in a second)."""
        conn.execute("SET LOCAL enable_hashjoin = off")
        conn.execute(f"SET LOCAL work_mem = '{COMPARE_WORK_MEM}'")
        conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")

    def _compare_rows(self, conn: psycopg.Connection, sql: str, params: dict) -> list:
        """Two runs' pairs (``_comparing``; the pairs a page shows are then looked up by key:
        queries.compare_lists, Dialect.lookup), read as tuples (by position)."""
        with conn.transaction():
            self._comparing(conn)
            return self._rows(conn, sql, params)

    def _rows(self, conn: psycopg.Connection, sql: str, args) -> list[tuple]:
        """All of a statement's rows on ``conn``, as tuples (no Row made a row), read in
        binary (``_chunks``)."""
        with conn.cursor(row_factory=tuple_row, binary=True) as cur:
            return cur.execute(sql, args).fetchall()

    def _insert_id(self, conn: psycopg.Connection, sql: str, args) -> int:
        row = conn.execute(sql, args).fetchone()  # the statement ends RETURNING id
        return int(row[0]) if row else 0

    def _executemany(self, conn: psycopg.Connection, sql: str, rows: list) -> None:
        with conn.cursor() as cur:
            cur.executemany(sql, rows)

    def _explain(self, exc: Exception) -> StoreError:
        assert isinstance(exc, psycopg.Error)
        return pg_schema.explain(exc, self.url)

    def _is_unique_violation(self, exc: Exception) -> bool:
        return isinstance(exc, errors.UniqueViolation)

    def _is_refused_json(self, exc: Exception) -> bool:
        return isinstance(exc, errors.InvalidTextRepresentation)  # json_in's 22P02

    @staticmethod
    def _glob(pattern: str) -> tuple[str, bool]:
        return fnmatch_to_like(pattern)

    @staticmethod
    def _fts_query(text: str) -> str | None:
        """Every word must match, as a whole word, or as a prefix when it ends with ``*``
        (a word of several tokens, ``hf/llama``, is a phrase). Only letters and digits reach
        to_tsquery, each quoted: user text is never its syntax."""
        terms = []
        for raw in text.split():
            tokens = _WORD.findall(raw.lower())
            if not tokens:
                continue
            phrase = " <-> ".join(f"'{token}'" for token in tokens)
            terms.append(f"({phrase}{':*' if raw.endswith('*') else ''})")
        return " & ".join(terms) if terms else None

    @guarded
    def schema_version(self) -> int:
        row = self._conn().execute(pg_schema.VERSION).fetchone()
        return int(row[0]) if row else 0
