"""A case's history: its newest status, eager mode first.

A mixin of the SQL store (kb/sql_kb.py ``KnowledgeBase``); the store's surface
(kb/surface.py) asks it.
"""

from __future__ import annotations

from typing import Any

from torchport.kb.sql_common import guarded


class HistoryRead:
    # Provided by the store and its engine.
    _conn: Any
    q: Any

    @guarded
    def _last_status_by_case(
        self, device: str | None = None, cases: list[str] | None = None
    ) -> dict[str, str]:
        """The newest recorded status of each case (eager mode first), for listings. With
        ``cases``, two indexed lookups per case; without, one grouped pass over the index."""
        conn = self._conn()
        latest: dict[str, str] = {}
        if cases is not None:
            for case in cases:
                row = (
                    conn.execute(self.q.LAST_EAGER_STATUS, (case, device, device)).fetchone()
                    or conn.execute(self.q.LAST_ANY_STATUS, (case, device, device)).fetchone()
                )
                if row is not None:
                    latest[case] = row["status"]
            return latest
        eager: dict[str, str] = {}
        other: dict[str, tuple[int, str]] = {}  # no eager result: the newest of other modes
        sql = self.q.LAST_STATUS_EVERY_CASE if device else self.q.LAST_STATUS_EVERY_CASE_ANY_DEVICE
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
