"""A run's export lines, put together from the stored texts (records/line_text.py), read in spans
and in parts (kb/exchange.py writes them), and its artifacts.

A mixin of the SQL store (kb/sql_kb.py ``KnowledgeBase``); the store's surface
(kb/surface.py) asks it.
"""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Iterator
from itertools import islice
from typing import Any

from torchport.kb.sql_common import guarded
from torchport.records import line_text

# An export is read in parts (line_parts) only of a run this large: below it, a part's helper
# process (kb/forked.py, ~15 ms to start) costs more than it saves.
LINE_PART_MIN = 20_000


class ExportRead:
    # An export reads a run's lines in spans of this many ids, this many spans at a time, each
    # on a thread of its own (the engine's; 0: on the caller's thread).
    line_span = 5000
    # One: the server makes the next span while this process writes this one; a second
    # reader contends for the Python lock (PostgreSQL export of 100 000 results in two parts:
    # 0.82 s with one a process, 0.89 s with two, five rounds interleaved).
    line_threads = 1
    # Provided by the store and its engine.
    _conn: Any
    _connect: Any
    _count_results: Any
    _forget: Any
    _guard_iter: Any
    _is_refused_json: Any
    driver_error: Any
    _json: Any
    _result_dict: Any
    _rows: Any
    q: Any

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
            span = (run_id, low, high)
            try:  # most spans hold no NaN: read unguarded, again guarded where one does
                rows = self._rows(own, self.q.result_lines(guarded=False), span)
            except self.driver_error as exc:
                if not self._is_refused_json(exc):
                    raise
                rows = self._rows(own, self.q.result_lines(), span)
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
    def _artifacts(self, run_id: str) -> list[dict]:
        rows = self._conn().execute(self.q.ARTIFACTS_OF_RUN, (run_id,))
        return [{"path": r["path"], "sha256": r["sha256"], "bytes": r["bytes"]} for r in rows]
