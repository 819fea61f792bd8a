"""A run's headline: its status counts, grades and host ops from its tallies, and its medians
ranked in the database.

A mixin of the SQL store (kb/sql_kb.py ``KnowledgeBase``); the store's surface
(kb/surface.py) asks it. A comparison reads both runs' rows itself and folds them with the
same ``headlines`` (kb/reads/compare.py).
"""

from __future__ import annotations

import json
from typing import Any

from torchport.kb.sql_common import HOST_OP_CLASSES, guarded
from torchport.records.status import HEADLINE_GRADES


class HeadlineRead:
    # Provided by the store and its engine.
    _conn: Any
    q: Any

    @guarded
    def _status_counts(self, run_id: str) -> dict[str, int]:
        rows = self._conn().execute(self.q.RUN_STATUS_COUNTS, (run_id,))
        return {r["status"]: int(r["n"]) for r in rows}

    @guarded
    def _headline_counts(self, run_id: str | None = None) -> dict[str, dict]:
        """Per run (every run, or ``run_id``): ``statuses`` {status: n}, ``grades`` {grade: n}
        and, for results graded fallback or host, ``host_results``, ``host_ops`` {op:
        evidence class or None} and ``host_op_results`` {op: results}: statuses from the
        status index, grades and host ops from the graded results' index."""
        conn = self._conn()
        counts = (
            conn.execute(self.q.STATUS_COUNTS)
            if run_id is None
            else conn.execute(self.q.RUN_STATUS_COUNTS_BY_RUN, (run_id,))
        )
        statuses = counts.fetchall()
        sql = self.q.headline_groups(one_run=run_id is not None)
        groups = conn.execute(sql, (run_id,) if run_id is not None else ()).fetchall()
        return headlines(statuses, groups)

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


def headlines(statuses, groups) -> dict[str, dict]:
    """Each run's headline (``HeadlineRead._headline_counts``) from its rows: ``statuses``
    (run_id, status, n: queries.STATUS_COUNTS and its kin), ``groups`` (run_id, grade, ops,
    n: queries.headline_groups). A run with no rows has no entry."""
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

    for row in statuses:
        entry(row["run_id"])["statuses"][row["status"]] = int(row["n"])
    for row in groups:
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
