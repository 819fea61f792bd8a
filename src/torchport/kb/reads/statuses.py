"""A run's results in (case, mode) order, lean, from the outcomes index alone: a baseline's and a
gate's plain rows in parts (``store.statuses``), and outcome rows.

A mixin of the SQL store (kb/sql_kb.py ``KnowledgeBase``); the store's surface
(kb/surface.py) asks it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torchport.kb.reads.compare import outcome
from torchport.kb.sql_common import guarded, read_ahead


class StatusesRead:
    # Provided by the store and its engine.
    _case_ranges: Any
    _chunks: Any
    _count_results: Any
    _guard_iter: Any
    _stream: Any
    q: Any
    reads_ahead: Any

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

    @guarded
    def _case_parts(self, run_a: str, parts: int) -> list[tuple[str | None, str | None]]:
        """A run cut into up to ``parts`` ranges of its case ids (low, high; None: open),
        each of ``pairs_per_part`` results or more, for ``iter_statuses`` to read apart; one,
        (None, None), for a small run."""
        return self._case_ranges(run_a, self._count_results(run_id=run_a), parts)
