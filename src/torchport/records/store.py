"""SQLite store: numbered migrations, one writer, results committed one by one."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import socket
import sqlite3
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

RESULT_STATUSES = (
    "pass", "build_fail", "place_fail", "eager_fail", "compile_fail", "compile_timeout",
    "compiled_run_fail", "accuracy_fail", "oom", "timeout", "crash", "skip",
)
RUN_STATES = ("running", "complete", "interrupted")
_JSON_COLUMNS = ("metrics", "findings", "durations", "artifacts")


class StoreError(Exception):
    """A knowledge base that cannot be used, with a message that says what to do."""


def default_db_path() -> str:
    return os.environ.get("TORCHPORT_DB") or "torchport.db"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files("torchport.records") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text()))
    return sorted(found)


SCHEMA_VERSION = max(number for number, _ in _migrations())


def open_store(url: str | None = None, *, create: bool = True) -> "Store":
    """Open the knowledge base at ``url`` (a path or ``sqlite:///path``).

    ``create=False`` refuses to make a new file: read commands must not leave empty databases.
    """
    url = url or default_db_path()
    if "://" in url and not url.startswith("sqlite:///"):
        scheme = url.split("://", 1)[0]
        raise StoreError(f"database URL scheme '{scheme}' is not supported yet; "
                         "use a file path or sqlite:///path")
    path = url.removeprefix("sqlite:///")
    if not create and not Path(path).exists():
        raise StoreError(f"no knowledge base at '{path}'; run 'torchport run --db {path}' first "
                         "or pass the right --db")
    return Store(path)


class Store:
    def __init__(self, path: str):
        self.path = path
        try:
            self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA foreign_keys = ON")
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"'{path}' is not a readable torchport database ({exc}); "
                             "pass another --db or move the file aside") from None
        if version > SCHEMA_VERSION:
            raise StoreError(f"'{path}' has schema v{version}, newer than this torchport's "
                             f"v{SCHEMA_VERSION}; upgrade torchport to read it")
        if version < SCHEMA_VERSION:
            self._migrate(version)

    def _migrate(self, current: int) -> None:
        try:
            self.conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.DatabaseError:
            pass  # e.g. a read-only medium; rollback journal still works
        for number, sql in _migrations():
            if number <= current:
                continue
            # executescript commits first; wrap each migration in its own transaction.
            self.conn.executescript(f"BEGIN;\n{sql}\nPRAGMA user_version = {number};\nCOMMIT;")

    def close(self) -> None:
        self.conn.close()

    # -- writes ---------------------------------------------------------------------------
    def put_environment(self, data: dict) -> str:
        blob = json.dumps(data, sort_keys=True, default=str)
        env_id = hashlib.sha256(blob.encode()).hexdigest()[:16]
        self.conn.execute("INSERT OR IGNORE INTO environments(id, data, created_at) VALUES (?,?,?)",
                          (env_id, blob, now_iso()))
        return env_id

    def create_run(self, *, run_id: str, command: str, suite: str, device: str, config: dict,
                   plan: list, labels: dict) -> None:
        self.conn.execute(
            "INSERT INTO runs(id, started_at, state, pid, host, command, suite, device, config,"
            " plan, labels) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, now_iso(), "running", os.getpid(), socket.gethostname(), command, suite,
             device, json.dumps(config, sort_keys=True), json.dumps(plan), json.dumps(labels)))

    def reopen_run(self, run_id: str) -> None:
        """Mark a run live again for ``--resume``."""
        self.conn.execute("UPDATE runs SET state='running', pid=?, host=?, finished_at=NULL "
                          "WHERE id=?", (os.getpid(), socket.gethostname(), run_id))

    def set_environment(self, run_id: str, env_id: str) -> None:
        self.conn.execute("UPDATE runs SET environment_id=? WHERE id=?", (env_id, run_id))

    def finish_run(self, run_id: str, state: str) -> None:
        assert state in RUN_STATES, state
        self.conn.execute("UPDATE runs SET state=?, finished_at=? WHERE id=?",
                          (state, now_iso(), run_id))

    def add_result(self, run_id: str, result: dict) -> int:
        """Commit one result at once (autocommit): a killed sweep keeps every finished result."""
        if result["status"] not in RESULT_STATUSES:
            raise ValueError(f"unknown status {result['status']!r}")
        error = result.get("error") or {}
        with self.conn:  # one transaction for the row and its op table
            cur = self.conn.execute(
                "INSERT INTO results(run_id, case_id, case_version, mode, status, stage, grade,"
                " metrics, findings, durations, artifacts, error_type, error_message, traceback,"
                " started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, result["case"], result.get("case_version", 1), result["mode"],
                 result["status"], result.get("stage"), result.get("grade"),
                 *(json.dumps(result.get(col) or ({} if col != "artifacts" else []),
                              sort_keys=True, default=str) for col in _JSON_COLUMNS),
                 error.get("type"), error.get("message"), error.get("traceback"),
                 result.get("started_at"), now_iso()))
            result_id = cur.lastrowid
            ops = (result.get("findings") or {}).get("ops") or []
            self.conn.executemany(
                "INSERT INTO result_ops(result_id, op, device, count, fallback) VALUES (?,?,?,?,?)",
                [(result_id, o["op"], o["device"], o["count"], int(bool(o.get("fallback"))))
                 for o in ops])
        return result_id

    # -- reads ----------------------------------------------------------------------------
    def get_run(self, run_id: str) -> dict:
        row = self.conn.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            latest = self.conn.execute("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1"
                                       ).fetchone()
            hint = f" (latest is {latest['id']}; 'torchport runs' lists all)" if latest else ""
            raise StoreError(f"no run '{run_id}' in {self.path}{hint}")
        return self._run_dict(row)

    def latest_run_id(self) -> str:
        row = self.conn.execute("SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1"
                                ).fetchone()
        if row is None:
            raise StoreError(f"no runs in {self.path}; start one with 'torchport run'")
        return row["id"]

    def list_runs(self) -> list[dict]:
        rows = self.conn.execute("SELECT * FROM runs ORDER BY started_at DESC, rowid DESC")
        runs = [self._run_dict(r) for r in rows]
        counts = self.conn.execute("SELECT run_id, status, COUNT(*) n FROM results "
                                   "GROUP BY run_id, status").fetchall()
        for run in runs:
            run["counts"] = {c["status"]: c["n"] for c in counts if c["run_id"] == run["id"]}
        return runs

    def environment(self, env_id: str | None) -> dict:
        if env_id is None:
            return {}
        row = self.conn.execute("SELECT data FROM environments WHERE id=?", (env_id,)).fetchone()
        return json.loads(row["data"]) if row else {}

    def done_items(self, run_id: str) -> set[tuple[str, str]]:
        rows = self.conn.execute("SELECT case_id, mode FROM results WHERE run_id=?", (run_id,))
        return {(r["case_id"], r["mode"]) for r in rows}

    def results(self, *, run_id: str | None = None, status: str | None = None,
                case_glob: str | None = None, fallback_op: str | None = None) -> list[dict]:
        sql, args = "SELECT * FROM results WHERE 1=1", []
        if run_id:
            sql += " AND run_id=?"
            args.append(run_id)
        if status:
            sql += " AND status=?"
            args.append(status)
        if fallback_op:
            fallback_op = fallback_op.replace("::", ".")  # aten::cumsum names aten.cumsum too
            sql += (" AND id IN (SELECT result_id FROM result_ops WHERE fallback=1 AND"
                    " (op=? OR op LIKE ?))")
            args += [fallback_op, fallback_op + ".%"]
        rows = self.conn.execute(sql + " ORDER BY id", args).fetchall()
        found = [self._result_dict(r) for r in rows]
        if case_glob:
            found = [r for r in found if fnmatch.fnmatch(r["case"], case_glob)]
        return found

    def search(self, text: str) -> list[dict]:
        # Quote every term so user text cannot inject FTS5 syntax; prefix-match each term.
        terms = [t for t in text.replace('"', " ").split() if t]
        if not terms:
            return []
        query = " ".join(f'"{t}"*' for t in terms)
        rows = self.conn.execute(
            "SELECT results.* FROM results_fts JOIN results ON results.id = results_fts.rowid "
            "WHERE results_fts MATCH ? ORDER BY rank", (query,)).fetchall()
        return [self._result_dict(r) for r in rows]

    def last_status_by_case(self, device: str | None = None) -> dict[str, str]:
        """The newest recorded status of each case (eager mode first), for listings."""
        sql = ("SELECT r.case_id, r.mode, r.status FROM results r JOIN runs ON runs.id=r.run_id"
               + (" WHERE runs.device=?" if device else "") + " ORDER BY r.id")
        latest: dict[str, str] = {}
        for row in self.conn.execute(sql, (device,) if device else ()):
            latest[row["case_id"]] = row["status"] if row["mode"] == "eager" or \
                row["case_id"] not in latest else latest[row["case_id"]]
        return latest

    # -- row shaping ------------------------------------------------------------------------
    @staticmethod
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

    def _run_dict(self, row: sqlite3.Row) -> dict:
        run = dict(row)
        for col in ("config", "plan", "labels"):
            run[col] = json.loads(run[col])
        # A run whose supervisor was SIGKILLed never wrote its end: report it as interrupted.
        if run["state"] == "running" and not self._alive(run["pid"], run["host"]):
            run["state"] = "interrupted"
        return run

    @staticmethod
    def _result_dict(row: sqlite3.Row) -> dict:
        r = dict(row)
        out = {"run_id": r["run_id"], "case": r["case_id"], "case_version": r["case_version"],
               "mode": r["mode"], "status": r["status"], "stage": r["stage"], "grade": r["grade"]}
        for col in _JSON_COLUMNS:
            out[col] = json.loads(r[col])
        out["error"] = None if r["error_type"] is None and r["error_message"] is None else {
            "type": r["error_type"], "message": r["error_message"], "traceback": r["traceback"]}
        out["started_at"], out["finished_at"] = r["started_at"], r["finished_at"]
        return out
