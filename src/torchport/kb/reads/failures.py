"""A run's failures grouped by (status, stage, error signature), from its tallies.

A mixin of the SQL store (kb/sql_kb.py ``KnowledgeBase``); the store's surface
(kb/surface.py) asks it.
"""

from __future__ import annotations

from typing import Any

from torchport.kb.sql_common import guarded
from torchport.records.status import FAILURE_SEVERITY


class FailuresRead:
    # Provided by the store and its engine.
    _conn: Any
    q: Any

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
