"""The one read a comparison of two runs makes (docs/where-rules-live.md, "compare"): everything
``torchport compare``, its ``--json`` and the dashboard's compare page show, in one store call,
with or without a limit. The view (views/compare.py) formats what it returns; nothing is
decided there.

What it reads: both runs (without their plans, read only where a pair is missing on one side),
their first environments, the notes on either, the pairs joined and decided inside the
database from the declared rules (records/figures.py, SQL in kb/queries.py), each run's
grouped placement counts, its ``dist/*`` results and, for a run with an operator audit, the
results coverage reads.

The pairs: with a ``limit`` the database counts every list and picks each list's first pairs
(``queries.compare_lists``, a thread a part); without, it returns every pair that shows a
change (``queries.pairs_that_may_differ``), read and shaped in parts, the later ones by
forked children (kb/forked.py: shaping 37 000 pairs is Python's work, which a thread
cannot share). Both give the same ``decided`` counts; ``shape`` (the view's) turns a part's
pairs into what it keeps, so a child sends back that, not the pairs.

A mixin of ``SQLStore`` (kb/sql_kb.py ``KnowledgeBase``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from torchport.kb import forked, queries
from torchport.kb.reads.headline import headlines
from torchport.kb.sql_common import missing_run, note_dict, read_ahead
from torchport.records.figures import COMPARE_LINES, OUTCOME_FIGURES, PLACEMENT_RULE

Pair = tuple[dict, dict, frozenset[str]]
# A comparison's lists of pairs in the database's names (kb/queries.py decided_names),
# by the list a page reads alone: which decisions each list is read from.
PERF_LIST = "perf"
AUDIT_GLOB, DIST_GLOB = "audit/*", "dist/*"


def _as_list(pairs: Iterable[Pair]) -> list[Pair]:
    return list(pairs)


class CompareRead:
    # A comparison splits two large runs in parts: one per core, up to four, each of at least
    # this many pairs.
    compare_parts = max(1, min(os.cpu_count() or 1, 4))
    pairs_per_part = 25_000
    # Provided by the store (kb/sql_kb.py, sql_store.py and the engine).
    q: Any
    url: str
    driver_error: Any
    reads_ahead: bool
    _conn: Any
    _borrow: Any
    _lend_back: Any
    _chunks: Any
    _stream: Any
    _explain: Any
    _store_error: Any
    _json: Any
    _run_dict: Any
    _results_sql: Any
    _result_dicts: Any
    _reopened: Any

    def compare(
        self,
        run_a: str,
        run_b: str,
        *,
        limit: int | None = None,
        only: tuple[str, ...] | None = None,
        after: dict | None = None,
        shape: Callable[[Iterable[Pair]], Any] = _as_list,
        lines: dict | None = None,
        unless: tuple | None = None,
    ) -> dict:
        """Two stored runs compared, in one read:

        ``runs`` (A, B: ``get_run(plan=False)``), ``environments`` (A's, B's first, {} for
        none), ``notes`` (on either run), ``counts`` {(status A, status B): [pairs, pairs
        timed on both sides]}, ``decided`` {decision: pairs} over every pair (the names of
        queries.decided_names), ``parts``: ``shape(pairs)`` of each part in (case, mode)
        order, each pair (outcome A, outcome B, the decisions it is shown for), ``only_a`` /
        ``only_b`` ([case, mode] recorded in one run), ``unrecorded_a`` / ``unrecorded_b``
        (of the other side's only pairs, how many this run planned), ``headline`` (each run's
        ``headline_counts``), ``dist`` (each run's ``dist/*`` results), ``audited`` (each
        run's results, where it holds an operator audit, else None) and ``version``: what
        the comparison was read from (each run's state, end and size: results are only
        ever added, so a resumed or running run has a new one).

        ``limit``: each list's first ``limit`` pairs only, and every placement candidate
        (a pair in several lists is shown for each it was picked for); ``only``: just these
        lists (decision names, ``perf`` for the step-time changes); ``after``: each list from
        the pair after this one (``case``, ``mode``, ``metric``: a figure's place in its
        list, ``gap``: the step-time list's order). Without a limit every pair that shows a
        change, with every decision that holds of it. ``lines``: the rules' lines
        (records/figures.py COMPARE_LINES, the default). ``unless``: a ``version`` read
        before; where both runs still have it, only ``runs``, ``notes`` and ``version`` are
        read, and ``unchanged`` is True (a comparison kept by the dashboard's memo).

        Every statement is issued here or by the engine; a driver error leaves as one
        StoreError line, as ``sql_common.guarded`` makes it for the store's other reads."""
        try:
            conn = self._conn()
            got = self._two_runs(conn, run_a, run_b)
            if got["version"] == unless:
                return {key: got[key] for key in ("runs", "notes", "version")} | {"unchanged": True}
            a, b = got["runs"]
            run_a, run_b = a["id"], b["id"]
            params = {"run_a": run_a, "run_b": run_b, **_line_params(lines or COMPARE_LINES)}
            sizes = got.pop("sizes")
            if limit is None:
                counts, decided, parts = self._every_pair(params, sizes[run_a], shape)
            else:
                counts, decided, pairs = self._first_pairs(params, sizes[run_a], limit, only, after)
                parts = [shape(pairs)]
            only_in = self._only_in(run_a, run_b, counts, sizes)
            return got | {
                "counts": counts,
                "decided": decided,
                "parts": parts,
                **only_in,
                # read a plan (100 000 entries in a large sweep) only where a pair is missing
                "unrecorded_a": self._planned(conn, run_a, only_in["only_b"]),
                "unrecorded_b": self._planned(conn, run_b, only_in["only_a"]),
                "dist": tuple(self._results_of(conn, r, DIST_GLOB) for r in (run_a, run_b)),
                "audited": tuple(self._audited(conn, r) for r in (run_a, run_b)),
                "unchanged": False,
            }
        except self.driver_error as exc:
            raise self._store_error(exc, "compare", (run_a, run_b)) from None

    def _two_runs(self, conn, run_a: str, run_b: str) -> dict:
        """Both runs as a listing shows them, their first environments, sizes, headlines and
        notes, and the comparison's ``version``: a fixed few statements (queries.COMPARED_RUNS
        and what follows it), whatever the runs' sizes."""
        ids = (run_a, run_b)
        rows = {row["id"]: row for row in conn.execute(self.q.COMPARED_RUNS, ids)}
        for run_id in ids:
            if run_id not in rows:
                latest = conn.execute(self.q.latest_run()).fetchone()
                raise missing_run(self.url, run_id, latest["id"] if latest else None)
        env_ids: dict[str, list[str]] = {run_id: [] for run_id in ids}
        for row in conn.execute(self.q.compared_environments(), ids):
            env_ids[row["run_id"]].append(row["environment_id"])
        a, b = (self._run_dict(rows[r], env_ids[r]) for r in ids)
        firsts = [run["environment_ids"][0] if run["environment_ids"] else None for run in (a, b)]
        data = {
            row["id"]: row["data"]
            for row in (conn.execute(self.q.ENVIRONMENTS_BY_ID, firsts) if any(firsts) else ())
        }
        statuses = conn.execute(self.q.COMPARED_STATUS_COUNTS, ids).fetchall()
        groups = conn.execute(self.q.headline_groups(one_run=False, two_runs=True), ids)
        headline = headlines(statuses, groups.fetchall())
        sizes = {r: sum(headline.get(r, {}).get("statuses", {}).values()) for r in ids}
        notes = [note_dict(row) for row in conn.execute(self.q.NOTES_OF_RUNS, ids)]
        return {
            "runs": (a, b),
            "environments": tuple(
                self._json(data[env], dict, f"environment {env}") if env in data else {}
                for env in firsts
            ),
            # those on A, then those on B (oldest first each; once where A is B)
            "notes": [n for n in notes if n["run_id"] == run_a]
            + ([n for n in notes if n["run_id"] == run_b] if run_b != run_a else []),
            "headline": tuple(headline.get(r, {}) for r in ids),
            "sizes": sizes,
            "version": tuple(
                (run["state"], run["finished_at"], sizes[run["id"]]) for run in (a, b)
            ),
        }

    def _planned(self, conn, run_id: str, missing: list[list[str]]) -> int:
        """How many of ``missing`` (the other run's pairs this one lacks) it planned."""
        if not missing:
            return 0
        row = conn.execute(self.q.RUN_PLAN, (run_id,)).fetchone()
        plan = {tuple(item) for item in self._json(row["plan"], list, f"run {run_id} plan")}
        return sum(tuple(key) in plan for key in missing)

    def _results_of(
        self, conn, run_id: str, glob: str | None, limit: int | None = None
    ) -> list[dict]:
        """A run's results (``glob``: those whose case matches), in recorded order, the first
        ``limit``: the store's read of a page of results (kb/sql_kb.py ``_results_sql``)."""
        sql, args, exact = self._results_sql(run_id, None, glob, None, "id", False, limit, 0)
        rows = conn.execute(sql, args) if exact and limit is not None else self._stream(sql, args)
        return list(self._result_dicts(rows, glob, exact, limit, 0, False))

    def _audited(self, conn, run_id: str) -> list[dict] | None:
        """A run's results where it holds an operator audit (views/op_coverage.py reads
        them), else None, read no further than one page of its audit cases."""
        if not self._results_of(conn, run_id, AUDIT_GLOB, limit=1):
            return None
        return self._results_of(conn, run_id, None)

    # -- every pair: the superset, in parts ------------------------------------------------------
    def _every_pair(
        self, params: dict, size_a: int, shape: Callable
    ) -> tuple[dict, dict[str, int], list]:
        """Every pair that may show a change, shaped in parts of A's cases, one a core: this
        process shapes the first part while forked children shape the others (their own
        connections), and a thread counts the transitions meanwhile."""
        # The parts first: a child is forked only from a process of one thread (kb/forked.py)
        cases = self._case_ranges(params["run_a"], size_a, forked.workers())
        counting: list[concurrent.futures.Future] = []

        def here(first: tuple[str | None, str | None]) -> tuple[Any, collections.Counter]:
            pool = concurrent.futures.ThreadPoolExecutor(1)
            counting.append(pool.submit(self._pair_counts_apart, dict(params)))
            pool.shutdown(wait=False)  # its one task runs on while the pairs are shaped
            return _shaped(self, params, shape, first)

        apart = functools.partial(_apart, self, params, shape)
        (mine, tally), theirs = forked.spread(cases, here, apart)
        parts = [mine]
        for part, counted in theirs:
            parts.append(part)
            tally.update(counted)
        decided: dict[str, int] = dict.fromkeys(queries.decided_names(), 0)
        for holds, n in tally.items():
            for name in holds:
                decided[name] += n
        return counting[0].result(), decided, parts

    def _pairs(self, params: dict, cases: tuple[str | None, str | None]) -> Iterator[Pair]:
        """One part's pairs that may show a change (queries.pairs_that_may_differ), decided
        by the database, read ahead on a thread of their own where the engine says so."""
        low, high = cases
        params = dict(params, low=low, high=high)
        sql = self.q.pairs_that_may_differ(bounds=(low is not None, high is not None))
        rows = (
            read_ahead(lambda: self._chunks(sql, params, joined=True))
            if self.reads_ahead
            else self._stream(sql, params, plain=True)
        )
        return self._decided_pairs(rows)

    def _decided_pairs(self, rows: Iterable[tuple]) -> Iterator[Pair]:
        """Each row of queries.pairs_that_may_differ as a pair; a driver error while they are
        read leaves as one StoreError line (``compare``'s guard has returned by then)."""
        width = 7 + len(OUTCOME_FIGURES)
        names = queries.decided_names()
        try:
            for row in rows:
                yield outcome(row[:width]), outcome(row[width : 2 * width]), _holds(names, row[-1])
        except self.driver_error as exc:
            raise self._explain(exc) from None

    def _pair_counts_apart(self, params: dict) -> dict[tuple[str, str], list[int]]:
        """The pairs per (status A, status B), and how many of them are timed on both sides
        (queries.pair_counts), on a connection of their own (another thread's), lent back."""
        conn = self._borrow()
        try:
            sql = self.q.pair_counts()
            rows = self._compare_rows(conn, sql, params)
            return {(r[0], r[1]): [r[2], r[3] or 0] for r in rows}
        finally:
            self._lend_back(conn)

    # -- a page: each list's first pairs -----------------------------------------------------------
    def _first_pairs(
        self, params: dict, size_a: int, limit: int, only, after: dict | None
    ) -> tuple[dict, dict[str, int], list[Pair]]:
        """The database decides every pair, counts every list and picks the first ``limit``
        pairs of each (queries.compare_lists), a part of A's cases a thread; each pair picked
        is returned once, in (case, mode) order, with the decisions it was picked for."""
        params = dict(params, limit=limit)
        if after:
            params |= {f"after_{k}": after.get(k) for k in ("case", "mode", "metric", "gap")}
        reads = {"only": only, "after": bool(after)}

        def apart(low: str | None, high: str | None) -> tuple[dict, dict, dict]:
            conn = self._borrow()  # on the part's thread: connects while the first part runs
            try:
                return self._compare_part(params, low, high, conn, reads)
            finally:
                self._lend_back(conn)

        # The first part on this thread and its connection, each other on its own
        first, *others = self._case_ranges(params["run_a"], size_a)
        with concurrent.futures.ThreadPoolExecutor(max(1, len(others))) as pool:
            rest = [pool.submit(apart, low, high) for low, high in others]
            parts = [self._compare_part(params, *first, self._conn(), reads)]
            parts += [future.result() for future in rest]
        counts: dict[tuple[str, str], list[int]] = {}
        decided: dict[str, int] = {}
        lists: dict[str, list[Pair]] = {}
        for part_counts, part_decided, part_lists in parts:
            for key, (n, timed) in part_counts.items():
                total = counts.setdefault(key, [0, 0])
                total[0], total[1] = total[0] + n, total[1] + timed
            for name, n in part_decided.items():
                decided[name] = decided.get(name, 0) + n
            for name, rows in part_lists.items():
                lists.setdefault(name, []).extend(rows)
        for name, rows in lists.items():  # the first pairs of each part: the first of all
            if len(parts) > 1 and name != PLACEMENT_RULE.name:
                rows.sort(key=_largest_change_first if name == PERF_LIST else _in_case_order)
                del rows[limit:]
        return counts, decided, _picked(lists)

    def _case_ranges(
        self, run_a: str, n: int, parts: int | None = None
    ) -> list[tuple[str | None, str | None]]:
        """Two large runs are compared in parts of A's case ids (``parts``, else
        ``compare_parts``, at most, each of ``pairs_per_part`` pairs or more): (low, high)
        per part, None where a part is open (``n``: A's results). A case's modes stay in one
        part."""
        most = self.compare_parts if parts is None else parts
        count = max(1, min(most, n // self.pairs_per_part))
        conn = self._conn()
        cuts = {
            row[0]
            for k in range(1, count)
            for row in conn.execute(self.q.CASE_AT, (run_a, n * k // count))
        }
        bounds = sorted(cuts)
        return list(zip([None, *bounds], [*bounds, None], strict=True))

    def _compare_part(
        self, params: dict, low: str | None, high: str | None, conn, reads: dict
    ) -> tuple[dict, dict, dict]:
        """One part's transition counts, decision counts and first pairs of each list (one
        statement: queries.compare_lists)."""
        params = dict(params, low=low, high=high)
        bounds = (low is not None, high is not None)
        names = queries.decided_names()
        counts: dict[tuple[str, str], list[int]] = {}
        decided = dict.fromkeys(names, 0)
        lists: dict[str, list[Pair]] = {}
        width = 7 + len(OUTCOME_FIGURES)
        sql = self.q.compare_lists(bounds=bounds, **reads)
        for row in self._compare_rows(conn, sql, params):
            kind, outcomes = row[0], row[6 : 6 + 2 * width]
            if kind == "transition":
                counts[(row[1], row[2])] = [row[3], row[4] or 0]
            elif kind == "decided":
                for name in _holds(names, row[5]):
                    decided[name] += row[3]
            else:
                pair = (outcome(outcomes[:width]), outcome(outcomes[width:]), _holds(names, row[5]))
                lists.setdefault(kind, []).append(pair)
        return counts, decided, lists

    def _compare_rows(self, conn, sql: str, params: dict):
        """The rows of one of the comparison's joins (an engine may set its planner first)."""
        return conn.execute(sql, params)

    def _only_in(
        self, run_a: str, run_b: str, counts: dict, sizes: dict
    ) -> dict[str, list[list[str]]]:
        """The pairs of each run the other did not record; looked for only where the run
        holds more results than the pairs in common (one count from an index)."""
        common = sum(n for n, _ in counts.values())
        conn = self._conn()
        return {
            side: [[r[0], r[1]] for r in conn.execute(self.q.ONLY_IN, (run, other))]
            if sizes[run] > common
            else []
            for side, run, other in (("only_a", run_a, run_b), ("only_b", run_b, run_a))
        }


def _counted(pairs: Iterable[Pair], tally: collections.Counter) -> Iterator[Pair]:
    """The pairs, each one's decisions counted into ``tally`` as it passes (a few distinct
    sets among the pairs of two runs)."""
    for pair in pairs:
        tally[pair[2]] += 1
        yield pair


def _shaped(
    store: CompareRead, params: dict, shape: Callable, cases
) -> tuple[Any, collections.Counter]:
    """One part's pairs shaped here, their decisions counted."""
    tally: collections.Counter = collections.Counter()
    return shape(_counted(store._pairs(params, cases), tally)), tally


def _apart(store: CompareRead, params: dict, shape: Callable, cases) -> tuple[Any, dict]:
    """In a forked child: one part's pairs shaped on connections of its own."""
    with store._reopened() as own:
        part, tally = _shaped(own, params, shape, cases)
    return part, dict(tally)


def _picked(lists: dict[str, list[Pair]]) -> list[Pair]:
    """Each pair picked for some list once, in (case, mode) order, with the decisions it was
    picked for (a pair in a status list and another list: the status list's read carries the
    error line)."""
    from torchport.records.figures import FASTER, SLOWER

    picked: dict[tuple[str, str], tuple[dict, dict, set[str]]] = {}
    for name, read in sorted(
        lists.items(), key=lambda item: item[0] not in queries.STATUS_DECISIONS
    ):
        shown_for = {SLOWER, FASTER} if name == PERF_LIST else {name}
        for a, b, holds in read:
            entry = picked.setdefault((a["case"], a["mode"]), (a, b, set()))
            entry[2].update(holds & shown_for)
    return [(a, b, frozenset(shown)) for _, (a, b, shown) in sorted(picked.items())]


def _line_params(lines: dict) -> dict:
    """A comparison's lines as the SQL's named parameters (queries' compare section)."""
    return {
        "parity": lines["parity_factor"],
        "compile": lines["compile_ratio"],
        "memory": lines["memory_ratio"],
        "min_samples": lines["min_samples"],
        "min_change": lines["min_change"],
    }


def _holds(names: list[str], bits: int) -> frozenset[str]:
    """The decisions a pair's bits (queries.decisions) name (a few distinct sets among the
    pairs of two runs: each made once)."""
    return _named_bits(tuple(names), bits)


@functools.lru_cache(maxsize=4096)
def _named_bits(names: tuple[str, ...], bits: int) -> frozenset[str]:
    return frozenset(name for k, name in enumerate(names) if bits >> k & 1)


def _in_case_order(pair: tuple) -> tuple[str, str]:
    return pair[0]["case"], pair[0]["mode"]


def _largest_change_first(pair: tuple) -> tuple[float, str, str]:
    """The step-time list's order (queries.compare_lists: the gap between the medians, as
    SQL computes it, largest first; then case order)."""
    a, b = (p["figures"]["perf_median_ms"] for p in pair[:2])
    return -abs(b / a - 1), pair[0]["case"], pair[0]["mode"]


def outcome(row) -> dict:
    """An outcome row: case, mode, status, stage, grade, the key figures, host ops, error line."""
    first, n = 5, len(OUTCOME_FIGURES)
    host_ops, error_line = row[first + n], row[first + n + 1]
    return {
        "case": row[0],
        "mode": row[1],
        "status": row[2],
        "stage": row[3],
        "grade": row[4],
        "figures": {
            name: v
            for name, v in zip(OUTCOME_FIGURES, row[first : first + n], strict=True)
            if v is not None
        },
        "host_ops": json.loads(host_ops) if host_ops else None,
        "error_line": error_line,
    }
