"""Full text over case ids, error messages and tracebacks, its count, and the notes' search.

A mixin of the SQL store (kb/sql_kb.py ``KnowledgeBase``); the store's surface
(kb/surface.py) asks it.
"""

from __future__ import annotations

from typing import Any

from torchport.kb.sql_common import guarded, note_dict

RANK_WINDOW = 1000  # newest matches ranked by relevance (see queries.SEARCH_WINDOW)
ID_CHUNK = 500  # ids per IN (...) query, under SQLite's bound-parameter limit


class SearchRead:
    # Provided by the store and its engine.
    _conn: Any
    _fts_query: Any
    _result_dict: Any
    q: Any

    @guarded
    def _search(self, text: str, *, limit: int | None = None, offset: int = 0) -> list[dict]:
        """Results for ``text``, best first: the newest RANK_WINDOW matches ranked by relevance
        (a case-id hit first, then an error message, then a traceback; the engine scores, lower
        is better), then older matches, newest first. ``limit``/``offset`` page them; pages
        never overlap."""
        query = self._fts_query(text)
        if query is None:
            return []
        conn, no_limit = self._conn(), self.q.NO_LIMIT
        end = None if limit is None else offset + limit
        ids: list[int] = []
        if offset < RANK_WINDOW:
            window = conn.execute(self.q.SEARCH_WINDOW, (query, RANK_WINDOW)).fetchall()
            ranked = sorted(window, key=lambda row: (row[1], -row[0]))  # best, then newest
            ids = [row[0] for row in ranked[offset:end]]
            if len(window) == RANK_WINDOW and (end is None or end > RANK_WINDOW):
                more = no_limit if end is None else end - RANK_WINDOW
                recent = conn.execute(self.q.SEARCH_BY_RECENCY, (query, more, RANK_WINDOW))
                ids += [r[0] for r in recent]
        else:
            page = no_limit if limit is None else limit
            ids = [r[0] for r in conn.execute(self.q.SEARCH_BY_RECENCY, (query, page, offset))]
        rows: dict[int, Any] = {}
        for start in range(0, len(ids), ID_CHUNK):
            chunk = ids[start : start + ID_CHUNK]
            rows.update((r["id"], r) for r in conn.execute(self.q.results_by_id(len(chunk)), chunk))
        return [self._result_dict(rows[i]) for i in ids if i in rows]

    @guarded
    def _count_search(self, text: str) -> int:
        query = self._fts_query(text)
        if query is None:
            return 0
        return int(self._conn().execute(self.q.SEARCH_COUNT, (query,)).fetchone()[0])

    # -- one run in summary ------------------------------------------------------------------------

    @guarded
    def _search_notes(self, text: str, *, limit: int | None = 50, offset: int = 0) -> list[dict]:
        query = self._fts_query(text)
        if query is None:
            return []
        page = self.q.NO_LIMIT if limit is None else limit
        rows = self._conn().execute(self.q.SEARCH_NOTES, (query, page, offset))
        return [note_dict(r) for r in rows]
