"""The SQLite knowledge base: one file, a connection per thread, results committed one by one.

Read mode opens ``file:PATH?mode=ro`` with ``query_only``: it never creates, migrates or
switches the journal mode, and refuses a file that is not a torchport knowledge base before
SQLite opens it. Write mode checks an existing file (identity, integrity, writability) when it
is opened, so a run on a bad file fails before it records anything, and creates a new file only
at its first use, so bad input found after the open leaves no empty database behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import threading
from pathlib import Path

from torchport.records import queries as q
from torchport.records import sqlite_schema as schema
from torchport.records.base import RUN_STATES, RunInProgress, StoreError
from torchport.records.figures import key_figures
from torchport.records.result import MalformedResult, Result
from torchport.records.signature import error_signature
from torchport.records.sqlite_common import JSON_COLUMNS as _JSON_COLUMNS
from torchport.records.sqlite_common import guarded as _guarded
from torchport.records.sqlite_common import now_iso
from torchport.records.sqlite_common import op_rows as _op_rows
from torchport.records.sqlite_common import to_json as _to_json
from torchport.records.sqlite_kb import KnowledgeBase

BUSY_TIMEOUT_S = 30.0
RANK_WINDOW = 1000  # newest matches ranked by relevance (see queries.SEARCH_WINDOW)
ID_CHUNK = 500  # ids per IN (...) query, under SQLite's bound-parameter limit


def _alive(pid: int | None, host: str | None) -> bool:
    if not pid or host != socket.gethostname():
        return True  # another host's run: cannot tell from here, trust the stored state
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _host_ops_text(findings: dict) -> str | None:
    """findings' fallback_ops as stored in the ``host_ops`` column (None when none), in the
    form SQLite's json_extract gives (sorted keys, no spaces), as migration 0003 filled it."""
    ops = findings.get("fallback_ops")
    if not ops:
        return None
    try:
        return json.dumps(ops, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError) as exc:
        raise MalformedResult(f"findings['fallback_ops'] cannot be stored: {exc}") from None


class SQLiteStore(KnowledgeBase):
    def __init__(self, path: str, *, write: bool):
        self.path = self.url = str(path)
        self.read_only = not write
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False
        self._version = schema.SCHEMA_VERSION  # what this file holds once opened
        exists = schema.check_path(self.path, write=write)
        if self.read_only:
            # Refuse from the raw header first: SQLite never opens another application's file.
            schema.refuse_unless_torchport(self.path, schema.header_user_version(self.path))
            self._open_checked(write=False)
        elif exists and Path(self.path).stat().st_size > 0:
            if schema.is_read_only_file(self.path):
                raise StoreError(
                    f"'{self.path}' is read-only; make it writable (chmod u+w) or pass another --db"
                )
            self._open_checked(write=True)

    # -- connections ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"the store for '{self.path}' is closed")
        mode = "ro" if self.read_only else "rwc"
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
            self._version = version
            if write:
                if tables:
                    schema.check_integrity(conn, self.path)
                schema.migrate(conn, self.path)
                self._version = schema.SCHEMA_VERSION
                conn.execute(q.SET_WAL)  # readers never wait on the writer
        except sqlite3.Error as exc:
            raise schema.explain(exc, self.path) from None
        finally:
            conn.close()
            with self._lock:
                self._conns.remove(conn)
        self._ready = True

    def _writer(self) -> sqlite3.Connection:
        if self.read_only:
            raise StoreError(f"'{self.path}' was opened read-only; open it with write=True")
        return self._conn()

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection):
        if conn.in_transaction:  # inside ``store.transaction()``: the outer one commits
            yield conn
            return
        conn.execute(q.BEGIN_IMMEDIATE)
        try:
            yield conn
        except BaseException:
            conn.execute(q.ROLLBACK)
            raise
        conn.execute(q.COMMIT)

    def close(self) -> None:
        with self._lock:
            conns, self._conns, self._closed = self._conns, [], True
        for conn in conns:
            conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @_guarded
    def schema_version(self) -> int:
        return self._conn().execute(q.USER_VERSION).fetchone()[0]

    # -- writes --------------------------------------------------------------------------------
    @_guarded
    def put_environment(self, data: dict) -> str:
        blob = json.dumps(data, sort_keys=True, default=str)
        env_id = hashlib.sha256(blob.encode()).hexdigest()[:16]
        self._writer().execute(q.INSERT_ENVIRONMENT, (env_id, blob, now_iso()))
        return env_id

    @_guarded
    def create_run(
        self,
        *,
        run_id: str,
        command: str,
        suite: str,
        device: str,
        config: dict,
        plan: list,
        labels: dict,
    ) -> None:
        self._writer().execute(
            q.INSERT_RUN,
            (
                run_id,
                now_iso(),
                os.getpid(),
                socket.gethostname(),
                command,
                suite,
                device,
                json.dumps(config, sort_keys=True, default=str),
                json.dumps(plan, default=str),
                json.dumps(labels, default=str),
            ),
        )

    @_guarded
    def reopen_run(self, run_id: str) -> None:
        conn = self._writer()
        with self._transaction(conn):  # check and claim under one lock: two resumes race
            row = conn.execute(q.RUN_LIVENESS, (run_id,)).fetchone()
            if row is None:
                raise self._no_run(run_id)
            pid, host = row["pid"], row["host"]
            if row["state"] == "running" and pid != os.getpid() and _alive(pid, host):
                raise RunInProgress(
                    f"run {run_id} is still going (process {pid} on {host}); "
                    f"wait for it or stop it (kill {pid}) before --resume"
                )
            conn.execute(q.REOPEN_RUN, (os.getpid(), socket.gethostname(), run_id))

    @_guarded
    def set_environment(self, run_id: str, env_id: str) -> None:
        conn = self._writer()
        with self._transaction(conn):
            conn.execute(q.SET_FIRST_ENVIRONMENT, (env_id, run_id))
            conn.execute(q.ADD_RUN_ENVIRONMENT, (run_id, env_id, now_iso()))

    @_guarded
    def finish_run(self, run_id: str, state: str) -> None:
        if state not in RUN_STATES:
            raise ValueError(f"unknown run state {state!r}")
        self._writer().execute(q.FINISH_RUN, (state, now_iso(), run_id))

    @_guarded
    def add_result(self, run_id: str, result: Result | dict) -> int:
        """One transaction for the row and its op table, committed at once: a killed sweep
        keeps every finished result. MalformedResult before anything is written."""
        conn = self._writer()
        with self._transaction(conn):
            return self._insert_result(conn, run_id, result)

    def _insert_result(self, conn: sqlite3.Connection, run_id: str, result: Result | dict) -> int:
        """Insert one validated result and its op table (in the caller's transaction). An
        imported result keeps its ``finished_at`` and its recorded ``ops`` rows."""
        data = result.to_dict() if isinstance(result, Result) else result
        value = Result.from_dict(data)
        recorded = not isinstance(result, Result) and "ops" in data
        ops = _op_rows(data["ops"] if recorded else value.findings.get("ops"))
        blobs = [_to_json(getattr(value, col), col) for col in _JSON_COLUMNS]
        error = value.error or {}
        finished = (None if isinstance(result, Result) else data.get("finished_at")) or now_iso()
        cur = conn.execute(
            q.INSERT_RESULT,
            (
                run_id,
                value.case,
                value.case_version,
                value.mode,
                value.status,
                value.stage,
                value.grade,
                *blobs,
                error.get("type"),
                error.get("message"),
                error.get("traceback"),
                value.started_at,
                finished,
                error_signature(error.get("type"), error.get("message")),
                _host_ops_text(value.findings),
                *key_figures(value.metrics),
            ),
        )
        result_id = int(cur.lastrowid or 0)
        conn.executemany(q.INSERT_RESULT_OP, [(result_id, *op) for op in ops])
        return result_id

    # -- reads ---------------------------------------------------------------------------------
    def _no_run(self, run_id: str) -> StoreError:
        latest = self._conn().execute(q.LATEST_RUN).fetchone()
        hint = f" (latest is {latest['id']}; 'torchport runs' lists all)" if latest else ""
        return StoreError(f"no run '{run_id}' in {self.path}{hint}")

    @_guarded
    def get_run(self, run_id: str) -> dict:
        row = self._conn().execute(q.RUN_BY_ID, (run_id,)).fetchone()
        if row is None:
            raise self._no_run(run_id)
        return self._run_dict(row)

    @_guarded
    def latest_run_id(self) -> str:
        row = self._conn().execute(q.LATEST_RUN).fetchone()
        if row is None:
            raise StoreError(f"no runs in {self.path}; start one with 'torchport run'")
        return row["id"]

    @_guarded
    def list_runs(self) -> list[dict]:
        """Newest first, each with ``counts`` and ``planned`` (the plan's length; a listing
        does not carry the plan itself, which holds 100 000 entries in a large sweep)."""
        conn = self._conn()
        runs = [self._run_dict(row) for row in conn.execute(q.LIST_RUNS).fetchall()]
        counts: dict[str, dict[str, int]] = {}
        for row in conn.execute(q.STATUS_COUNTS):
            counts.setdefault(row["run_id"], {})[row["status"]] = row["n"]
        for run in runs:
            run["counts"] = counts.get(run["id"], {})
        return runs

    @_guarded
    def environment(self, env_id: str | None) -> dict:
        if env_id is None:
            return {}
        row = self._conn().execute(q.ENVIRONMENT, (env_id,)).fetchone()
        return self._json(row["data"], dict, f"environment {env_id}") if row else {}

    @_guarded
    def done_items(self, run_id: str) -> set[tuple[str, str]]:
        rows = self._conn().execute(q.DONE_ITEMS, (run_id,))
        return {(r["case_id"], r["mode"]) for r in rows}

    @_guarded
    def results(
        self,
        *,
        run_id: str | None = None,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict]:
        """Filtered results in recorded order; ``limit``/``offset`` page them (None: all)."""
        return list(
            self._iter_results(
                run_id=run_id,
                status=status,
                case_glob=case_glob,
                fallback_op=fallback_op,
                limit=limit,
                offset=offset,
            )
        )

    @_guarded
    def search(self, text: str, *, limit: int | None = None, offset: int = 0) -> list[dict]:
        """Results for ``text``, best first: the newest RANK_WINDOW matches ranked by bm25 (a
        case-id hit first, then an error message, then a traceback), then older matches,
        newest first. ``limit``/``offset`` page them; pages never overlap."""
        query = self._fts_query(text)
        if query is None:
            return []
        conn = self._conn()
        end = None if limit is None else offset + limit
        ids: list[int] = []
        if offset < RANK_WINDOW:
            window = conn.execute(q.SEARCH_WINDOW, (query, RANK_WINDOW)).fetchall()
            ranked = sorted(window, key=lambda row: (row[1], -row[0]))  # best, then newest
            ids = [row[0] for row in ranked[offset:end]]
            if len(window) == RANK_WINDOW and (end is None or end > RANK_WINDOW):
                more = -1 if end is None else end - RANK_WINDOW
                ids += [r[0] for r in conn.execute(q.SEARCH_BY_RECENCY, (query, more, RANK_WINDOW))]
        else:
            ids = [
                r[0]
                for r in conn.execute(
                    q.SEARCH_BY_RECENCY, (query, -1 if limit is None else limit, offset)
                )
            ]
        rows: dict[int, sqlite3.Row] = {}
        for start in range(0, len(ids), ID_CHUNK):
            chunk = ids[start : start + ID_CHUNK]
            rows.update((r["id"], r) for r in conn.execute(q.results_by_id(len(chunk)), chunk))
        return [self._result_dict(rows[i]) for i in ids if i in rows]

    @staticmethod
    def _fts_query(text: str) -> str | None:
        """Every word must match, as a whole word, or as a prefix when it ends with ``*``.
        Words are quoted, so user text is never FTS5 syntax. (Prefixes are opt-in: a prefix
        query reads every posting of every word it covers, 100 000s for a common one.)"""
        terms = []
        for raw in text.replace('"', " ").split():
            word = raw.rstrip("*")
            if word:
                terms.append(f'"{word}"' + ("*" if raw.endswith("*") else ""))
        return " ".join(terms) if terms else None

    @_guarded
    def last_status_by_case(
        self, device: str | None = None, cases: list[str] | None = None
    ) -> dict[str, str]:
        """The newest recorded status of each case (eager mode first), for listings. With
        ``cases``, two indexed lookups per case; without, one grouped pass over the index."""
        conn = self._conn()
        latest: dict[str, str] = {}
        if cases is not None:
            for case in cases:
                row = (
                    conn.execute(q.LAST_EAGER_STATUS, (case, device, device)).fetchone()
                    or conn.execute(q.LAST_ANY_STATUS, (case, device, device)).fetchone()
                )
                if row is not None:
                    latest[case] = row["status"]
            return latest
        eager: dict[str, str] = {}
        other: dict[str, tuple[int, str]] = {}  # no eager result: the newest of other modes
        sql = q.LAST_STATUS_EVERY_CASE if device else q.LAST_STATUS_EVERY_CASE_ANY_DEVICE
        for row in conn.execute(sql, (device,) if device else ()):
            case = row["case_id"]
            if row["mode"] == "eager":
                eager[case] = row["status"]
            elif case not in other or row["id"] > other[case][0]:
                other[case] = (row["id"], row["status"])
        latest.update({case: status for case, (_, status) in other.items()})
        latest.update(eager)
        return latest

    # -- row shaping ---------------------------------------------------------------------------
    def _json(self, text: str | None, kind: type, what: str):
        try:
            value = json.loads(text) if text is not None else kind()
        except ValueError:
            raise StoreError(
                f"'{self.path}' holds {what} that is not JSON; the file was "
                "changed outside torchport: move it aside"
            ) from None
        return value if isinstance(value, kind) else kind()

    def _run_dict(self, row: sqlite3.Row) -> dict:
        run = dict(row)
        run["config"] = self._json(run["config"], dict, f"run {run['id']} config")
        if "plan" in run:  # a listing carries ``planned`` instead
            run["plan"] = self._json(run["plan"], list, f"run {run['id']} plan")
        run["labels"] = self._json(run["labels"], dict, f"run {run['id']} labels")
        env_rows = (
            self._conn().execute(q.RUN_ENVIRONMENTS, (run["id"],)).fetchall()
            if self._version >= 2
            else []
        )
        run["environment_ids"] = [r["environment_id"] for r in env_rows] or (
            [run["environment_id"]] if run["environment_id"] else []
        )
        # A run whose supervisor was SIGKILLed never wrote its end: report it as interrupted.
        if run["state"] == "running" and not _alive(run["pid"], run["host"]):
            run["state"] = "interrupted"
        return run

    def _result_dict(self, row: sqlite3.Row) -> dict:
        r = dict(row)
        out = {
            "run_id": r["run_id"],
            "case": r["case_id"],
            "case_version": r["case_version"],
            "mode": r["mode"],
            "status": r["status"],
            "stage": r["stage"],
            "grade": r["grade"],
        }
        for col, kind in _JSON_COLUMNS.items():
            # probe_versions came with schema v2; a v1 file read as it is has none.
            out[col] = self._json(r.get(col), kind, f"result {r['id']} {col}")
        out["error"] = (
            None
            if r["error_type"] is None and r["error_message"] is None
            else {
                "type": r["error_type"],
                "message": r["error_message"],
                "traceback": r["traceback"],
            }
        )
        out["started_at"], out["finished_at"] = r["started_at"], r["finished_at"]
        return out
