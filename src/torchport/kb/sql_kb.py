"""The knowledge-base side of the SQL store, engine-neutral: paged and streamed reads, run
summaries from indexes, run selection, decision notes, artifacts, and the batched writes an
import needs.

A mixin of ``SQLStore`` (it uses the engine's connections, dialect and row shaping). Reads of
an SQLite file older than schema v3 work as they are: no notes, no artifacts, signatures
computed on the fly.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import fnmatch
import json
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, TypeVar

from torchport.kb import queries
from torchport.kb.base import StoreError
from torchport.kb.reads.compare import CompareRead, outcome
from torchport.kb.sql_common import HOST_OP_CLASSES, guarded, now_iso, read_ahead
from torchport.kb.surface import Surface
from torchport.records import line_text
from torchport.records.result import Recorded, Result
from torchport.records.status import FAILURE_SEVERITY, HEADLINE_GRADES

T = TypeVar("T")

# An export is read in parts (line_parts) only of a run this large: below it, a part's helper
# process (kb/forked.py, ~15 ms to start) costs more than it saves.
LINE_PART_MIN = 20_000
ORDERS = tuple(queries.ORDERS)


class KnowledgeBase(Surface, CompareRead):
    # An export reads a run's lines in spans of this many ids, this many spans at a time, each
    # on a thread of its own (the engine's; 0: on the caller's thread).
    line_span = 5000
    # One: the server makes the next span while this process writes this one; a second
    # reader contends for the Python lock (PostgreSQL export of 100 000 results in two parts:
    # 0.82 s with one a process, 0.89 s with two, five rounds interleaved).
    line_threads = 1
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

    def _outcomes(self, run_id: str) -> Iterator[dict]:
        """A run's results in (case, mode) order, lean: ``case, mode, status, stage, grade,
        figures`` (the key figures, records/figures.py), ``host_ops`` (the host-op table where
        placement found one, else None) and ``error_line`` (a baseline and a gate read
        ``iter_statuses``, from the outcomes index alone)."""
        return self._guard_iter(self._iter_outcomes(run_id))

    def _iter_outcomes(self, run_id: str) -> Iterator[dict]:
        sql = self.q.outcomes()
        for row in self._stream(sql, (run_id,)):
            yield outcome(row)

    def _statuses_rows(
        self, run_id: str, cases: tuple[str | None, str | None] | None = None
    ) -> Iterator[tuple]:
        """A run's results in (case, mode) order as plain rows: ``(case, mode, status, stage,
        perf_median_ms, perf_p10_ms, perf_p90_ms, perf_samples)`` (queries.statuses), what a
        baseline and a gate read, from the outcomes index alone. ``cases``: one of
        ``case_parts``, only its cases."""
        low, high = cases or (None, None)
        sql = self.q.statuses(bounds=(low is not None, high is not None))
        args = (run_id, *(bound for bound in (low, high) if bound is not None))
        if self.reads_ahead:
            return self._guard_iter(read_ahead(lambda: self._chunks(sql, args)))
        return self._guard_iter(self._stream(sql, args, plain=True))

    def _export_lines(
        self, run_id: str, ids: tuple[int, int] | None = None
    ) -> Iterator[tuple[str | None, dict | None, list]]:
        """A run's results for an export file, in recorded order, never all in memory:
        (line, None, artifact paths) where the line was put together from the row's stored
        texts (records/line_text.py), else (None, result with its ``ops``, its artifacts)
        for the caller to write. ``ids``: only those from the first id to below the second
        (one of ``line_parts``)."""
        return self._guard_iter(self._iter_result_lines(run_id, ids))

    @guarded
    def _line_parts(self, run_id: str, parts: int) -> list[tuple[int, int] | None]:
        """A run's results cut into ``parts`` ranges of ids (from, below) of about as many
        results each, for ``iter_result_lines`` to read apart; one part, None (every
        result), where the run is smaller than LINE_PART_MIN results or the schema predates
        the export rows."""
        conn = self._conn()
        n = self._count_results(run_id=run_id)
        parts = max(1, min(parts, n // LINE_PART_MIN))
        if parts == 1:
            return [None]
        cuts = [
            conn.execute(self.q.ID_AT_OFFSET, (run_id, n * k // parts)).fetchone()[0]
            for k in range(parts)
        ]
        last = conn.execute(self.q.LAST_ID_OF_RUN, (run_id,)).fetchone()[0]
        return list(zip(cuts, [*cuts[1:], last + 1], strict=True))

    def _iter_result_lines(
        self, run_id: str, ids: tuple[int, int] | None
    ) -> Iterator[tuple[str | None, dict | None, list]]:
        for rows, ops in self._line_spans(run_id, ids):
            for row in rows:
                result_id, artifacts = row[1], row[8]
                text = line_text.line(run_id, row, ops.get(result_id))
                if text is None:
                    result = self._result_dict(
                        dict(zip(line_text.COLUMNS, row[1:], strict=True), run_id=run_id)
                    )
                    result["ops"] = line_text.op_dicts(ops.get(result_id))
                    yield None, result, result["artifacts"]
                elif artifacts == "[]":  # most results: no artifact
                    yield text, None, []
                else:
                    yield text, None, self._json(artifacts, list, f"result {result_id} artifacts")

    def _line_spans(
        self, run_id: str, ids: tuple[int, int] | None
    ) -> Iterator[tuple[list, dict[int, list[tuple]]]]:
        """A run's export rows (queries.result_lines) in recorded order, read in spans of
        ``line_span`` ids, each with its op table rows by result id (queries.ops_of_span), on
        a connection and a thread of its own, ``line_threads`` ahead: the database reads the
        next spans while the caller writes this one's (none: read on the caller's thread and
        connection). A run is exported once it is finished: no result of it is added between
        the spans' reads. ``ids``: only those ids (from, below)."""
        conn = self._conn()
        if ids is None:
            first = conn.execute(self.q.FIRST_ID_OF_RUN, (run_id,)).fetchone()
            if first is None:
                return
            last = conn.execute(self.q.LAST_ID_OF_RUN, (run_id,)).fetchone()
            ids = (first[0], last[0] + 1)
        stop = ids[1]
        lows = iter(range(ids[0], stop, self.line_span))

        def read(own: Any, low: int) -> tuple[list, dict[int, list[tuple]]]:
            high = min(low + self.line_span, stop)
            rows = self._rows(own, self.q.result_lines(), (run_id, low, high))
            ops: dict[int, list[tuple]] = {}
            for op in self._rows(own, self.q.ops_of_span(), (low, high)):
                ops.setdefault(op[0], []).append(op[1:])
            return rows, ops

        if not self.line_threads:
            for low in lows:
                yield read(conn, low)
            return
        idle = [self._connect() for _ in range(self.line_threads)]

        def read_own(low: int) -> tuple[list, dict[int, list[tuple]]]:
            own = idle.pop()
            try:
                return read(own, low)
            finally:
                idle.append(own)

        try:
            with concurrent.futures.ThreadPoolExecutor(self.line_threads) as pool:
                ahead = collections.deque(
                    pool.submit(read_own, low) for low in islice(lows, self.line_threads)
                )
                while ahead:
                    span = ahead.popleft().result()
                    ahead.extend(pool.submit(read_own, low) for low in islice(lows, 1))
                    yield span
        finally:
            for own in idle:
                self._forget(own)

    @guarded
    def _case_parts(self, run_a: str, parts: int) -> list[tuple[str | None, str | None]]:
        """A run cut into up to ``parts`` ranges of its case ids (low, high; None: open),
        each of ``pairs_per_part`` results or more, for ``iter_statuses`` to read apart; one,
        (None, None), for a small run."""
        return self._case_ranges(run_a, self._count_results(run_id=run_a), parts)

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
    def _count_search(self, text: str) -> int:
        query = self._fts_query(text)
        if query is None:
            return 0
        return int(self._conn().execute(self.q.SEARCH_COUNT, (query,)).fetchone()[0])

    # -- one run in summary ------------------------------------------------------------------------
    @guarded
    def _status_counts(self, run_id: str) -> dict[str, int]:
        rows = self._conn().execute(self.q.RUN_STATUS_COUNTS, (run_id,))
        return {r["status"]: int(r["n"]) for r in rows}

    @guarded
    def _failure_groups(
        self, run_id: str, *, worst_first: bool = False, limit: int = 10, examples: int = 3
    ) -> list[dict]:
        """A run's failures grouped by (status, stage, error signature) with their count, most
        common first, or worst first (records/status.py FAILURE_SEVERITY); each group
        names its first ``examples`` results and the first one's message."""
        conn = self._conn()
        sql = self.q.failure_groups(severity=FAILURE_SEVERITY if worst_first else ())
        groups = []
        for row in conn.execute(sql, (run_id, limit)).fetchall():
            stage, signature = row["stage"], row["signature"]
            sql = self.q.failure_examples(no_stage=stage is None, no_signature=signature is None)
            args = [run_id, row["status"], stage, signature, examples]
            args = [a for i, a in enumerate(args) if not (i in (2, 3) and a is None)]
            first = conn.execute(sql, args).fetchall()
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
    def _count_failure_groups(self, run_id: str) -> int:
        return int(self._conn().execute(self.q.FAILURE_GROUP_COUNT, (run_id,)).fetchone()[0])

    # -- a run's headline ----------------------------------------------------------------------
    @guarded
    def _headline_counts(self, run_id: str | None = None) -> dict[str, dict]:
        """Per run (every run, or ``run_id``): ``statuses`` {status: n}, ``grades`` {grade: n}
        and, for results graded fallback or host, ``host_results``, ``host_ops`` {op:
        evidence class or None} and ``host_op_results`` {op: results}: statuses from the
        status index, grades and host ops from the graded results' index."""
        conn = self._conn()
        out: dict[str, dict] = {}

        def entry(run: str) -> dict:
            return out.setdefault(
                run,
                {
                    "statuses": {},
                    "grades": {},
                    "host_results": 0,
                    "host_ops": {},
                    "host_op_results": {},
                },
            )

        counts = (
            conn.execute(self.q.STATUS_COUNTS)
            if run_id is None
            else conn.execute(self.q.RUN_STATUS_COUNTS_BY_RUN, (run_id,))
        )
        for row in counts:
            entry(row["run_id"])["statuses"][row["status"]] = int(row["n"])
        sql = self.q.headline_groups(one_run=run_id is not None)
        for row in conn.execute(sql, (run_id,) if run_id is not None else ()):
            h, n, grade = entry(row["run_id"]), int(row["n"]), row["grade"]
            h["grades"][grade] = h["grades"].get(grade, 0) + n
            if grade not in HEADLINE_GRADES:
                continue
            h["host_results"] += n
            for op, cls in _host_op_classes(row["ops"]).items():
                h["host_op_results"][op] = h["host_op_results"].get(op, 0) + n
                if h["host_ops"].get(op) is None or (cls and cls < h["host_ops"][op]):
                    h["host_ops"][op] = cls
        return out

    @guarded
    def _headline_figures(self, run_id: str) -> dict:
        """A run's median cold compile wait and median compiled speedup (eager / compiled
        median step time per case, both passed), each with its count, ranked in the
        database."""
        conn = self._conn()
        wait = conn.execute(self.q.headline_compile_wait(), (run_id,)).fetchone()
        fast = conn.execute(self.q.headline_speedup(), (run_id,)).fetchone()
        return {
            "compile_wait_s": wait["median"],
            "compiled": int(wait["n"] or 0),
            "speedup": fast["median"],
            "timed_pairs": int(fast["n"] or 0),
        }

    # -- choosing runs -----------------------------------------------------------------------------
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
        return [_note_dict(r) for r in rows]

    @guarded
    def _search_notes(self, text: str, *, limit: int | None = 50, offset: int = 0) -> list[dict]:
        query = self._fts_query(text)
        if query is None:
            return []
        page = self.q.NO_LIMIT if limit is None else limit
        rows = self._conn().execute(self.q.SEARCH_NOTES, (query, page, offset))
        return [_note_dict(r) for r in rows]

    @guarded
    def _artifacts(self, run_id: str) -> list[dict]:
        rows = self._conn().execute(self.q.ARTIFACTS_OF_RUN, (run_id,))
        return [{"path": r["path"], "sha256": r["sha256"], "bytes": r["bytes"]} for r in rows]


def _host_op_classes(text: str | None) -> dict[str, str | None]:
    """op -> its evidence class (None where the row predates classes), from a host_ops cell."""
    try:
        ops = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(ops, dict):
        return {}
    classes = ops.pop(HOST_OP_CLASSES, None)
    classes = classes if isinstance(classes, dict) else {}
    return {str(op): (str(classes[op]) if op in classes else None) for op in ops}


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
