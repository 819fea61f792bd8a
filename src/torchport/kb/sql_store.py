"""The store on SQL, engine-neutral: result validation, writes, reads, search ranking, run
liveness and row shaping, written once over the statements of ``queries.py``.

An engine (``SQLiteStore``, ``PGStore``) supplies its connections and dialect: ``q`` (its
statements: queries.py itself, or its translation), ``driver_error``, ``_conn``/``_writer``/
``_transaction``, ``_stream`` (rows never all in memory), ``_rows`` (all of them, as tuples),
``_insert_id``, ``_executemany``, ``_fts_query``, ``_glob`` and ``_explain``/
``_is_unique_violation`` for its errors.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from typing import Any, TypeVar

from torchport.kb.base import RUN_STATES, DuplicateResult, RunInProgress, StoreError
from torchport.kb.sql_common import (
    HEARTBEAT_S,
    JSON_COLUMNS,
    guarded,
    host_ops_text,
    missing_run,
    now_iso,
    op_rows,
    redact,
    supervisor_alive,
    to_json,
)
from torchport.kb.sql_kb import KnowledgeBase
from torchport.records.figures import key_figures
from torchport.records.result import Recorded, Result
from torchport.records.signature import error_signature

S = TypeVar("S", bound="SQLStore")
# Methods whose UNIQUE failure means "this (case, mode) is already recorded in the run".
_ADDS_RESULTS = ("_add_result", "add_results")


class SQLStore(KnowledgeBase):
    url: str
    read_only: bool
    q: Any
    driver_error: Any = ()
    _conns: list
    _lock: threading.Lock
    _closed: bool
    _heartbeat: tuple[threading.Event, threading.Thread] | None = None

    # -- what an engine provides ---------------------------------------------------------------
    def _explain(self, exc: Exception) -> StoreError:
        raise NotImplementedError

    def _is_unique_violation(self, exc: Exception) -> bool:
        raise NotImplementedError

    def _is_refused_json(self, exc: Exception) -> bool:
        """Whether ``exc`` is the engine refusing a text as JSON (Dialect.all_json unguarded)."""
        raise NotImplementedError

    def _insert_id(self, conn, sql: str, args) -> int:
        """Run an INSERT and return the new row's id."""
        raise NotImplementedError

    def _executemany(self, conn, sql: str, rows: list) -> None:
        raise NotImplementedError

    def _rows(self, conn, sql: str, args) -> list[tuple]:
        """All of a statement's rows on ``conn``, as plain tuples."""
        raise NotImplementedError

    def _store_error(self, exc: Exception, method: str, args: tuple) -> StoreError:
        if self._is_unique_violation(exc):
            if method in _ADDS_RESULTS:
                return DuplicateResult(
                    f"run {args[0]} already has a result for this (case, "
                    "mode); resume records only what is missing"
                )
            if method == "_put_run":
                return StoreError(f"run {args[0].get('id')} is already in '{self.url}'")
        return self._explain(exc)

    def _forget(self, conn) -> None:
        """Close one connection the store opened apart from its threads' own."""
        conn.close()
        with self._lock:
            if conn in self._conns:
                self._conns.remove(conn)

    def _borrow(self):
        """A connection apart from the threads' own, for one read on another thread (a part of
        a comparison, a read-ahead): a new one, or a spare one where the engine keeps them
        (``_lend_back``)."""
        raise NotImplementedError

    def _lend_back(self, conn) -> None:
        """The end of a ``_borrow``: the connection closed, or kept spare."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the heartbeat and close every connection the store opened (each thread's)."""
        self._stop_heartbeat()
        with self._lock:
            conns, self._conns, self._closed = self._conns, [], True
        for conn in conns:
            conn.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- run liveness --------------------------------------------------------------------------
    def _start_heartbeat(self, run_id: str) -> None:
        """Beat for ``run_id`` from a thread of its own until ``finish_run`` or ``close``: a
        reader on another host tells a live run from a dead one by it."""
        self._stop_heartbeat()
        stop = threading.Event()
        beat = threading.Thread(
            target=self._beat, args=(run_id, stop), daemon=True, name="torchport-heartbeat"
        )
        self._heartbeat = (stop, beat)
        beat.start()

    def _beat(self, run_id: str, stop: threading.Event) -> None:
        pid, host = os.getpid(), socket.gethostname()
        while not stop.wait(HEARTBEAT_S):
            try:
                self._writer().execute(self.q.HEARTBEAT, (now_iso(), run_id, pid, host))
            except (StoreError, *self._driver_errors()):
                # A missed beat is not the run's failure: the next one retries, and a reader
                # calls the run dead only after STALE_AFTER_S without any.
                continue

    def _driver_errors(self) -> tuple:
        errors = self.driver_error
        return errors if isinstance(errors, tuple) else (errors,)

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            stop, beat = self._heartbeat
            self._heartbeat = None
            stop.set()
            if beat is not threading.current_thread():
                beat.join(timeout=5)

    # -- writes --------------------------------------------------------------------------------
    @guarded
    def _put_environment(self, data: dict) -> str:
        blob = json.dumps(data, sort_keys=True, default=str)
        env_id = hashlib.sha256(blob.encode()).hexdigest()[:16]
        self._writer().execute(self.q.insert_environment(), (env_id, blob, now_iso()))
        return env_id

    @guarded
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
        started = now_iso()
        self._writer().execute(
            self.q.INSERT_RUN,
            (
                run_id,
                started,
                os.getpid(),
                socket.gethostname(),
                started,
                redact(command),  # a database URL on the command line keeps no password
                suite,
                device,
                json.dumps(config, sort_keys=True, default=str),
                json.dumps(plan, default=str),
                json.dumps(labels, default=str),
            ),
        )
        self._start_heartbeat(run_id)

    @guarded
    def _reopen_run(self, run_id: str) -> None:
        conn = self._writer()
        with self._transaction(conn):  # check and claim under one lock: two resumes race
            row = conn.execute(self.q.run_liveness(), (run_id,)).fetchone()
            if row is None:
                raise self._no_run(run_id)
            pid, host = row["pid"], row["host"]
            if (
                row["state"] == "running"
                and (pid != os.getpid() or host != socket.gethostname())
                and supervisor_alive(pid, host, row["heartbeat_at"])
            ):
                raise RunInProgress(
                    f"run {run_id} is still going (process {pid} on {host}); "
                    f"wait for it or stop it (kill {pid} on {host}) before --resume"
                )
            conn.execute(self.q.REOPEN_RUN, (os.getpid(), socket.gethostname(), now_iso(), run_id))
        self._start_heartbeat(run_id)

    @guarded
    def _set_environment(self, run_id: str, env_id: str) -> None:
        conn = self._writer()
        with self._transaction(conn):
            conn.execute(self.q.SET_FIRST_ENVIRONMENT, (env_id, run_id))
            conn.execute(self.q.add_run_environment(), (run_id, env_id, now_iso()))

    @guarded
    def _finish_run(self, run_id: str, state: str) -> None:
        if state not in RUN_STATES:
            raise ValueError(f"unknown run state {state!r}")
        self._stop_heartbeat()
        self._writer().execute(self.q.FINISH_RUN, (state, now_iso(), run_id))

    @guarded
    def _add_result(self, run_id: str, result: Result | Recorded | dict) -> int:
        """One transaction for the row and its op table, committed at once: a killed sweep
        keeps every finished result. MalformedResult before anything is written."""
        conn = self._writer()
        with self._transaction(conn):
            return self._insert_result(conn, run_id, result)

    def _insert_result(self, conn, run_id: str, result: Result | Recorded | dict) -> int:
        """Insert one result and its op table (in the caller's transaction). A ``Result`` is
        a value the driver validated where it entered (api.checked: ``Result.from_dict``), a
        ``Recorded`` one an import validated where it entered (kb/exchange_lines.py):
        neither is converted or validated again; a dict (a bulk load) is validated here. An
        imported result keeps its ``finished_at`` and its recorded ``ops`` rows (a dict: when
        it has an ``ops`` key)."""
        finished: str | None = None
        if isinstance(result, Recorded):
            value, finished, ops = result.value, result.finished_at, op_rows(result.ops)
        elif isinstance(result, Result):
            value, ops = result, op_rows(result.findings.get("ops"))
        else:  # a dict: validated here
            value, finished = Result.from_dict(result), result.get("finished_at")
            ops = op_rows(result["ops"] if "ops" in result else value.findings.get("ops"))
        blobs = [to_json(getattr(value, col), col) for col in JSON_COLUMNS]
        error = value.error or {}
        finished = finished or now_iso()
        result_id = self._insert_id(
            conn,
            self.q.insert_result(),
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
                host_ops_text(value.findings),
                *key_figures(value.metrics),
            ),
        )
        if ops:
            self._executemany(conn, self.q.INSERT_RESULT_OP, [(result_id, *op) for op in ops])
        return result_id

    # -- reads ---------------------------------------------------------------------------------
    def _no_run(self, run_id: str) -> StoreError:
        latest = self._conn().execute(self.q.latest_run()).fetchone()
        return missing_run(self.url, run_id, latest["id"] if latest else None)

    @guarded
    def get_run(self, run_id: str, *, plan: bool = True, environments: bool = False) -> dict:
        """``plan=False``: ``planned`` (the plan's length) in place of the plan, which holds
        100 000 entries in a large sweep; ``environments``: each of the run's environments
        as ``environments`` (a fingerprint each, in the order they were recorded)."""
        sql = self.q.RUN_BY_ID if plan else self.q.RUN_HEADER
        row = self._conn().execute(sql, (run_id,)).fetchone()
        if row is None:
            raise self._no_run(run_id)
        run = self._run_dict(row)
        if environments:
            run["environments"] = [self._environment(e) for e in run["environment_ids"]]
        return run

    @guarded
    def _latest_run_id(self) -> str:
        row = self._conn().execute(self.q.latest_run()).fetchone()
        if row is None:
            raise StoreError(f"no runs in {self.url}; start one with 'torchport run'")
        return row["id"]

    @guarded
    def _list_runs(self) -> list[dict]:
        """Newest first, each with ``counts`` and ``planned`` (the plan's length; a listing
        does not carry the plan itself, which holds 100 000 entries in a large sweep)."""
        conn = self._conn()
        sql = self.q.list_runs()
        runs = [self._run_dict(row) for row in conn.execute(sql).fetchall()]
        counts: dict[str, dict[str, int]] = {}
        for row in conn.execute(self.q.STATUS_COUNTS):
            counts.setdefault(row["run_id"], {})[row["status"]] = row["n"]
        for run in runs:
            run["counts"] = counts.get(run["id"], {})
        return runs

    @guarded
    def _environment(self, env_id: str | None) -> dict:
        if env_id is None:
            return {}
        row = self._conn().execute(self.q.ENVIRONMENT, (env_id,)).fetchone()
        return self._json(row["data"], dict, f"environment {env_id}") if row else {}

    @guarded
    def _done_items(self, run_id: str) -> set[tuple[str, str]]:
        rows = self._conn().execute(self.q.DONE_ITEMS, (run_id,))
        return {(r["case_id"], r["mode"]) for r in rows}

    @guarded
    def _results_page(
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

    def _json(self, text: str | None, kind: type, what: str):
        try:
            value = json.loads(text) if text is not None else kind()
        except ValueError:
            raise StoreError(
                f"'{self.url}' holds {what} that is not JSON; it was "
                "changed outside torchport: move it aside"
            ) from None
        return value if isinstance(value, kind) else kind()

    def _run_dict(self, row, environment_ids: list[str] | None = None) -> dict:
        """A run's row as a dict; ``environment_ids``: the run's rows of run_environments in
        the order recorded, where the caller read them (else read here)."""
        run = dict(row)
        run.pop("seq", None)  # PostgreSQL's stand-in for SQLite's rowid
        run["config"] = self._json(run["config"], dict, f"run {run['id']} config")
        if "plan" in run:  # a listing carries ``planned`` instead; a whole run, the plan
            run["plan"] = self._json(run["plan"], list, f"run {run['id']} plan")
            run.pop("planned", None)
        run["labels"] = self._json(run["labels"], dict, f"run {run['id']} labels")
        # Recorded before URL query passwords were redacted, or imported: never shown as is.
        run["command"] = redact(run["command"] or "")
        if environment_ids is None:
            rows = self._conn().execute(self.q.run_environments(), (run["id"],)).fetchall()
            environment_ids = [r["environment_id"] for r in rows]
        run["environment_ids"] = environment_ids or (
            [run["environment_id"]] if run["environment_id"] else []
        )
        heartbeat = run.setdefault("heartbeat_at", None)
        # A run whose supervisor was SIGKILLed never wrote its end: report it as interrupted.
        if run["state"] == "running" and not supervisor_alive(run["pid"], run["host"], heartbeat):
            run["state"] = "interrupted"
        return run

    def _result_dict(self, row) -> dict:
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
        for col, kind in JSON_COLUMNS.items():
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
