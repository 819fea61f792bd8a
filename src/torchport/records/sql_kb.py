"""The knowledge-base side of the SQL store, engine-neutral: paged and streamed reads, run
summaries from indexes, run selection, decision notes, artifacts, and the batched writes an
import needs.

A mixin of ``SQLStore`` (it uses the engine's connections, dialect and row shaping). Reads of
an SQLite file older than schema v3 work as they are: no notes, no artifacts, signatures
computed on the fly.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from torchport.records import queries
from torchport.records.base import StoreError
from torchport.records.figures import KEY_FIGURES
from torchport.records.result import Result
from torchport.records.signature import FAILURE_SEVERITY
from torchport.records.sql_common import guarded, now_iso

T = TypeVar("T")

NOTES_FROM = 3  # schema version that added notes, artifacts, signatures and key figures
ORDERS = tuple(queries.ORDERS)


class KnowledgeBase:
    # Provided by SQLStore and its engine.
    url: str
    q: Any
    driver_error: Any
    _version: int
    _conn: Any
    _writer: Any
    _transaction: Any
    _stream: Any
    _executemany: Any
    _insert_id: Any
    _insert_result: Any
    _result_dict: Any
    _explain: Any
    _fts_query: Any
    _glob: Any
    get_run: Any

    # -- batched writes ------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes inside commit together, or none does (an import is all or nothing)."""
        try:
            conn = self._writer()
            with self._transaction(conn):
                yield
        except self.driver_error as exc:
            raise self._explain(exc) from None

    @guarded
    def add_results(self, run_id: str, results: Iterable[Result | dict]) -> int:
        """Many results in one transaction (imports and bulk loads: a commit per result costs a
        disk sync each). A dict may carry ``finished_at`` and its recorded ``ops`` rows."""
        conn = self._writer()
        count = 0
        with self._transaction(conn):
            for result in results:
                self._insert_result(conn, run_id, result)
                count += 1
        return count

    @guarded
    def put_run(self, run: dict) -> None:
        """A run as it was recorded elsewhere (import): its times, state and environments."""
        conn = self._writer()
        env_ids = list(run.get("environment_ids") or [])
        with self._transaction(conn):
            conn.execute(
                self.q.INSERT_RUN_AS_RECORDED,
                (
                    run["id"],
                    run["started_at"],
                    run.get("finished_at"),
                    run["state"],
                    run.get("host"),
                    run["command"],
                    run["suite"],
                    run["device"],
                    json.dumps(run.get("config") or {}, sort_keys=True, default=str),
                    json.dumps(run.get("plan") or [], default=str),
                    json.dumps(run.get("labels") or {}, default=str),
                    env_ids[0] if env_ids else None,
                ),
            )
            self._executemany(
                conn,
                self.q.ADD_RUN_ENVIRONMENT,
                [(run["id"], env_id, run["started_at"]) for env_id in env_ids],
            )

    @guarded
    def add_note(
        self,
        run_id: str,
        text: str,
        *,
        case: str | None = None,
        mode: str | None = None,
        author: str | None = None,
        created_at: str | None = None,
    ) -> int | None:
        """Attach a note to a run, or to one case (and mode) of it. A note given with its
        ``created_at`` (an import) that is already there is not added twice: returns None."""
        if not text or not text.strip():
            raise StoreError("a note needs text; pass it as the last argument")
        self.get_run(run_id, plan=False)  # StoreError naming the latest run if there is no such run
        conn = self._writer()
        if case is not None:
            modes = {r["mode"] for r in conn.execute(self.q.CASE_IN_RUN, (run_id, case))}
            if not modes:
                raise StoreError(
                    f"run {run_id} has no result for case '{case}'; 'torchport "
                    f"results --run {run_id}' lists its cases"
                )
            if mode is not None and mode not in modes:
                raise StoreError(
                    f"run {run_id} has case '{case}' in mode(s) "
                    f"{', '.join(sorted(modes))}, not '{mode}'"
                )
        elif mode is not None:
            raise StoreError("a note on a mode needs its case too")
        with self._transaction(conn):
            if (
                created_at is not None
                and conn.execute(
                    self.q.NOTE_EXISTS, (run_id, case, mode, author, text, created_at)
                ).fetchone()
            ):
                return None
            return self._insert_id(
                conn,
                self.q.INSERT_NOTE,
                (run_id, case, mode, author, text, created_at or now_iso()),
            )

    @guarded
    def put_artifacts(self, run_id: str, artifacts: Iterable[dict]) -> None:
        """Content hashes of the files a run's results point at (path, sha256, bytes)."""
        rows = [(run_id, a["path"], a.get("sha256"), a.get("bytes")) for a in artifacts]
        conn = self._writer()
        with self._transaction(conn):
            self._executemany(conn, self.q.INSERT_ARTIFACT, rows)

    # -- streamed and paged reads ----------------------------------------------------------------
    def iter_results(
        self,
        *,
        run_id: str | None = None,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
        order: str = "id",
        with_ops: bool = False,
    ) -> Iterator[dict]:
        """Results one at a time, never all in memory. ``order``: "id" (recorded) or "case"
        (case, mode; with ``run_id``, from the index). ``with_ops``: each carries its op table
        as ``ops``."""
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}")
        return self._guard_iter(
            self._iter_results(
                run_id=run_id,
                status=status,
                case_glob=case_glob,
                fallback_op=fallback_op,
                order=order,
                with_ops=with_ops,
            )
        )

    def iter_outcomes(self, run_id: str) -> Iterator[dict]:
        """A run's results in (case, mode) order, lean: ``case, mode, status, stage, grade,
        figures`` (the key figures, records/figures.py), ``host_ops`` (the host-op table where
        placement found one, else None) and ``error_line``."""
        return self._guard_iter(self._iter_outcomes(run_id))

    def _iter_outcomes(self, run_id: str) -> Iterator[dict]:
        sql = self.q.outcomes(version=self._version)
        for row in self._stream(sql, (run_id,)):
            yield _outcome(row)

    @guarded
    def compare_pairs(
        self,
        run_a: str,
        run_b: str,
        *,
        parity_factor: float,
        compile_ratio: float,
        memory_ratio: float,
        min_samples: int,
    ) -> dict:
        """Two runs joined inside SQLite: ``counts`` {(status A, status B): [pairs, pairs with a
        step time on both sides]}, ``only_a``/``only_b`` ([case, mode] lists) and ``pairs``,
        an iterator of (outcome A, outcome B) for only the pairs that may show a change (see
        queries.pairs_that_may_differ; the caller decides each)."""
        version = self._version
        conn = self._conn()
        counts = {
            (r[0], r[1]): [r[2], r[3] or 0]
            for r in conn.execute(
                self.q.pair_counts(version=version), {"run_a": run_a, "run_b": run_b}
            )
        }
        only_a = [[r[0], r[1]] for r in conn.execute(self.q.ONLY_IN, (run_a, run_b))]
        only_b = [[r[0], r[1]] for r in conn.execute(self.q.ONLY_IN, (run_b, run_a))]
        params = {
            "run_a": run_a,
            "run_b": run_b,
            "parity": parity_factor,
            "compile": compile_ratio,
            "memory": memory_ratio,
            "min_samples": min_samples,
        }
        width = 7 + len(KEY_FIGURES)
        rows = self._stream(self.q.pairs_that_may_differ(version=version), params)
        pairs = ((_outcome(row[:width]), _outcome(row[width:])) for row in rows)
        return {
            "counts": counts,
            "only_a": only_a,
            "only_b": only_b,
            "pairs": self._guard_iter(pairs),
        }

    def _guard_iter(self, rows: Iterator[T]) -> Iterator[T]:
        try:
            yield from rows
        except self.driver_error as exc:
            raise self._explain(exc) from None

    def _filters(self, run_id, status, case_glob, fallback_op) -> tuple[dict, list, bool]:
        """SQL flags, parameters and whether the SQL alone is exact (see records/globs.py)."""
        args: list[Any] = [v for v in (run_id, status) if v]
        exact = True
        if case_glob:
            glob, exact = self._glob(case_glob)
            args.append(glob)
        if fallback_op:
            name = fallback_op.replace("::", ".")  # aten::cumsum names aten.cumsum too
            args += [name, len(name) + 1, name + "."]
        flags = {
            "run_id": bool(run_id),
            "status": bool(status),
            "case_glob": bool(case_glob),
            "fallback_op": bool(fallback_op),
        }
        return flags, args, exact

    def _iter_results(
        self,
        *,
        run_id=None,
        status=None,
        case_glob=None,
        fallback_op=None,
        order="id",
        with_ops=False,
        limit=None,
        offset=0,
    ) -> Iterator[dict]:
        flags, args, exact = self._filters(run_id, status, case_glob, fallback_op)
        paged = exact and (limit is not None or offset)
        sql = self.q.select_results(**flags, order=order, with_ops=with_ops, paged=bool(paged))
        if paged:
            args += [self.q.NO_LIMIT if limit is None else limit, offset]
        # A page is bounded: read on the store's connection; anything else is streamed.
        bounded = paged and limit is not None
        rows = self._conn().execute(sql, args) if bounded else self._stream(sql, args)
        skip, left = (0, None) if exact else (offset, limit)
        for row in rows:
            if not exact and not fnmatch.fnmatchcase(row["case_id"], case_glob):
                continue
            if skip:
                skip -= 1
                continue
            if left is not None:
                if left <= 0:
                    return
                left -= 1
            out = self._result_dict(row)
            if with_ops:
                out["ops"] = json.loads(row["ops_json"])
            yield out

    @guarded
    def count_results(
        self,
        *,
        run_id: str | None = None,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
    ) -> int:
        flags, args, exact = self._filters(run_id, status, case_glob, fallback_op)
        if exact:
            return int(self._conn().execute(self.q.count_results(**flags), args).fetchone()[0])
        return sum(
            1
            for _ in self._iter_results(
                run_id=run_id, status=status, case_glob=case_glob, fallback_op=fallback_op
            )
        )

    @guarded
    def count_results_by_run(
        self,
        *,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
    ) -> dict[str, int]:
        flags, args, exact = self._filters(None, status, case_glob, fallback_op)
        if exact:
            rows = self._conn().execute(self.q.count_results_by_run(**flags), args)
            return {row["run_id"]: row["n"] for row in rows}
        counts: dict[str, int] = {}
        for r in self._iter_results(status=status, case_glob=case_glob, fallback_op=fallback_op):
            counts[r["run_id"]] = counts.get(r["run_id"], 0) + 1
        return counts

    @guarded
    def count_search(self, text: str) -> int:
        query = self._fts_query(text)
        if query is None:
            return 0
        return int(self._conn().execute(self.q.SEARCH_COUNT, (query,)).fetchone()[0])

    # -- one run in summary ------------------------------------------------------------------------
    @guarded
    def status_counts(self, run_id: str) -> dict[str, int]:
        rows = self._conn().execute(self.q.RUN_STATUS_COUNTS, (run_id,))
        return {r["status"]: r["n"] for r in rows}

    def _signature_sql(self) -> str:
        return (
            "signature"
            if self._version >= NOTES_FROM
            else "torchport_signature(error_type, error_message)"
        )

    @guarded
    def failure_groups(
        self, run_id: str, *, worst_first: bool = False, limit: int = 10, examples: int = 3
    ) -> list[dict]:
        """A run's failures grouped by (status, stage, error signature) with their count, most
        common first, or worst first (records/signature.py FAILURE_SEVERITY); each group
        names its first ``examples`` results and the first one's message."""
        sig = self._signature_sql()
        conn = self._conn()
        sql = self.q.failure_groups(signature=sig, severity=FAILURE_SEVERITY if worst_first else ())
        groups = []
        for row in conn.execute(sql, (run_id, limit)).fetchall():
            first = conn.execute(
                self.q.failure_examples(sig),
                (run_id, row["status"], row["stage"], row["signature"], examples),
            ).fetchall()
            message = (first[0]["error_message"] or "").strip() if first else ""
            groups.append(
                {
                    "status": row["status"],
                    "stage": row["stage"],
                    "signature": row["signature"],
                    "count": row["n"],
                    "examples": [{"case": r["case_id"], "mode": r["mode"]} for r in first],
                    "message": message.splitlines()[0] if message else None,
                }
            )
        return groups

    @guarded
    def count_failure_groups(self, run_id: str) -> int:
        sql = self.q.failure_group_count(self._signature_sql())
        return int(self._conn().execute(sql, (run_id,)).fetchone()[0])

    # -- choosing runs -----------------------------------------------------------------------------
    @guarded
    def find_runs(
        self,
        *,
        device: str | None = None,
        suite: str | None = None,
        labels: dict[str, str] | None = None,
        complete: bool = True,
    ) -> list[str]:
        """Ids of the runs matching every condition, newest first (``complete``: only runs
        that finished their plan)."""
        found = []
        for row in self._conn().execute(self.q.RUN_SELECTORS):
            if complete and row["state"] != "complete":
                continue
            if device is not None and row["device"] != device:
                continue
            if suite is not None and row["suite"] != suite:
                continue
            if labels:
                try:
                    have = json.loads(row["labels"] or "{}")
                except ValueError:
                    continue
                if not isinstance(have, dict) or any(
                    k not in have or str(have[k]) != str(v) for k, v in labels.items()
                ):
                    continue
            found.append(row["id"])
        return found

    # -- notes and artifacts ---------------------------------------------------------------------
    @guarded
    def notes(self, *, run_id: str | None = None, case: str | None = None) -> list[dict]:
        """Notes of a run (or of one case of it), oldest first; every note without a run."""
        if self._version < NOTES_FROM:
            return []
        conn = self._conn()
        if run_id is None:
            rows = conn.execute(self.q.ALL_NOTES)
        elif case is None:
            rows = conn.execute(self.q.NOTES_OF_RUN, (run_id,))
        else:
            rows = conn.execute(self.q.NOTES_OF_CASE, (run_id, case))
        return [_note_dict(r) for r in rows]

    @guarded
    def search_notes(self, text: str, *, limit: int | None = 50, offset: int = 0) -> list[dict]:
        query = self._fts_query(text)
        if query is None or self._version < NOTES_FROM:
            return []
        page = self.q.NO_LIMIT if limit is None else limit
        rows = self._conn().execute(self.q.SEARCH_NOTES, (query, page, offset))
        return [_note_dict(r) for r in rows]

    @guarded
    def artifacts(self, run_id: str) -> list[dict]:
        if self._version < NOTES_FROM:
            return []
        rows = self._conn().execute(self.q.ARTIFACTS_OF_RUN, (run_id,))
        return [{"path": r["path"], "sha256": r["sha256"], "bytes": r["bytes"]} for r in rows]


def _outcome(row) -> dict:
    """An outcome row: case, mode, status, stage, grade, the key figures, host ops, error line."""
    first, n = 5, len(KEY_FIGURES)
    host_ops, error_line = row[first + n], row[first + n + 1]
    return {
        "case": row[0],
        "mode": row[1],
        "status": row[2],
        "stage": row[3],
        "grade": row[4],
        "figures": {
            name: v
            for name, v in zip(KEY_FIGURES, row[first : first + n], strict=True)
            if v is not None
        },
        "host_ops": json.loads(host_ops) if host_ops else None,
        "error_line": error_line,
    }


def _note_dict(row) -> dict:
    return {
        "id": row["id"],
        "run_id": row["run_id"],
        "case": row["case_id"],
        "mode": row["mode"],
        "author": row["author"],
        "text": row["text"],
        "created_at": row["created_at"],
    }
