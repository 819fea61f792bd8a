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

from torchport.kb import queries
from torchport.kb.base import StoreError
from torchport.kb.reads.compare import CompareRead
from torchport.kb.reads.export import ExportRead
from torchport.kb.reads.failures import FailuresRead
from torchport.kb.reads.headline import HeadlineRead
from torchport.kb.reads.history import HistoryRead
from torchport.kb.reads.search import SearchRead
from torchport.kb.reads.statuses import StatusesRead
from torchport.kb.sql_common import guarded, note_dict, now_iso
from torchport.kb.surface import Surface
from torchport.records.result import Recorded, Result

T = TypeVar("T")

ORDERS = tuple(queries.ORDERS)


class KnowledgeBase(
    Surface,
    CompareRead,
    StatusesRead,
    ExportRead,
    SearchRead,
    FailuresRead,
    HeadlineRead,
    HistoryRead,
):
    # Provided by SQLStore and its engine.
    url: str
    q: Any
    driver_error: Any
    _conn: Any
    _writer: Any
    _transaction: Any
    _stream: Any
    _chunks: Any  # where reads_ahead: plain rows in lists, on a connection of their own
    reads_ahead: bool
    _executemany: Any
    _insert_id: Any
    _insert_result: Any
    _connect: Any
    _forget: Any
    _borrow: Any
    _lend_back: Any
    _result_dict: Any
    _rows: Any
    _json: Any
    _explain: Any
    _fts_query: Any
    _glob: Any
    get_run: Any

    # -- batched writes ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _all_or_none(self) -> Iterator[None]:
        """Writes inside commit together, or none does (an import is all or nothing)."""
        try:
            conn = self._writer()
            with self._transaction(conn):
                yield
        except self.driver_error as exc:
            raise self._explain(exc) from None

    @guarded
    def add_results(self, run_id: str, results: Iterable[Result | Recorded | dict]) -> int:
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
    def _put_run(self, run: dict) -> None:
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
                self.q.add_run_environment(),
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
                    self.q.note_exists(), (run_id, case, mode, author, text, created_at)
                ).fetchone()
            ):
                return None
            return self._insert_id(
                conn,
                self.q.insert_note(),
                (run_id, case, mode, author, text, created_at or now_iso()),
            )

    @guarded
    def _put_artifacts(self, run_id: str, artifacts: Iterable[dict]) -> None:
        """Content hashes of the files a run's results point at (path, sha256, bytes)."""
        rows = [(run_id, a["path"], a.get("sha256"), a.get("bytes")) for a in artifacts]
        conn = self._writer()
        with self._transaction(conn):
            self._executemany(conn, self.q.insert_artifact(), rows)

    # -- streamed and paged reads ----------------------------------------------------------------
    def _results_stream(
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
        sql, args, exact = self._results_sql(
            run_id, status, case_glob, fallback_op, order, with_ops, limit, offset
        )
        # A page is bounded: read on the store's connection; anything else is streamed.
        bounded = exact and limit is not None
        rows = self._conn().execute(sql, args) if bounded else self._stream(sql, args)
        yield from self._result_dicts(rows, case_glob, exact, limit, offset, with_ops)

    def _results_sql(
        self, run_id, status, case_glob, fallback_op, order, with_ops, limit, offset
    ) -> tuple[str, list, bool]:
        """The statement of a read of results and its parameters, and whether the SQL alone
        is exact (else ``_result_dicts`` filters the rows by ``case_glob`` and pages them)."""
        flags, args, exact = self._filters(run_id, status, case_glob, fallback_op)
        paged = exact and (limit is not None or offset)
        sql = self.q.select_results(**flags, order=order, with_ops=with_ops, paged=bool(paged))
        if paged:
            args += [self.q.NO_LIMIT if limit is None else limit, offset]
        return sql, args, exact

    def _result_dicts(
        self, rows, case_glob, exact: bool, limit, offset, with_ops: bool
    ) -> Iterator[dict]:
        """The result dicts of the rows of ``_results_sql``'s statement."""
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
    def _count_results(
        self,
        *,
        run_id: str | None = None,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
    ) -> int:
        if run_id and not (status or case_glob or fallback_op):
            # A run's size from its tallies (a few hundred rows), not its 100 000 index entries
            return int(self._conn().execute(self.q.RUN_COUNT, (run_id,)).fetchone()[0])
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
    def _count_results_by_run(
        self,
        *,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
    ) -> dict[str, int]:
        flags, args, exact = self._filters(None, status, case_glob, fallback_op)
        if fallback_op and not (status or case_glob):
            spans = self._conn().execute(self.q.count_op_results_by_run_span(), args).fetchall()
            if not any(row["overlaps"] for row in spans):
                return {row["run_id"]: row["n"] for row in spans}
        if exact:
            rows = self._conn().execute(self.q.count_results_by_run(**flags), args)
            return {row["run_id"]: row["n"] for row in rows}
        counts: dict[str, int] = {}
        for r in self._iter_results(status=status, case_glob=case_glob, fallback_op=fallback_op):
            counts[r["run_id"]] = counts.get(r["run_id"], 0) + 1
        return counts

    @guarded
    def _find_runs(
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
        for row in self._conn().execute(self.q.run_selectors()):
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
        conn = self._conn()
        if run_id is None:
            rows = conn.execute(self.q.ALL_NOTES)
        elif case is None:
            rows = conn.execute(self.q.NOTES_OF_RUN, (run_id,))
        else:
            rows = conn.execute(self.q.NOTES_OF_CASE, (run_id, case))
        return [note_dict(r) for r in rows]
