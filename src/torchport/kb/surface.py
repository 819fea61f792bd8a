"""The store's public surface (kb/base.py ``Store``): its writes, and one read per question
the tool asks of a knowledge base (docs/where-rules-live.md, "the store's surface").

Each read here answers one question whole (which runs, which results, what matches a search, a
run's failures, a run's headline, a run's statuses, what changed between two runs, a case's
history) and hands the work to the engine's private reads (kb/sql_kb.py, sql_store.py,
compare_read.py); the export and import of kb/exchange.py use those private reads
directly, inside the knowledge base. A mixin of ``SQLStore``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from torchport.kb import forked


class Surface:
    # Provided by the store and its engine.
    _put_environment: Any
    _set_environment: Any
    _reopen_run: Any
    _finish_run: Any
    _list_runs: Any
    _find_runs: Any
    _latest_run_id: Any
    _results_page: Any
    _results_stream: Any
    _count_results: Any
    _count_results_by_run: Any
    _done_items: Any
    _search: Any
    _count_search: Any
    _search_notes: Any
    _failure_groups: Any
    _count_failure_groups: Any
    _headline_counts: Any
    _headline_figures: Any
    _statuses_rows: Any
    _outcomes: Any
    _case_parts: Any
    _reopened: Any
    _last_status_by_case: Any

    # -- writes ---------------------------------------------------------------------------------
    def update_run(
        self,
        run_id: str,
        *,
        state: str | None = None,
        environment: dict | None = None,
    ) -> str | None:
        """A run's life after ``create_run``. ``environment``: a fingerprint a worker of the
        run reported, stored once (content-addressed) and recorded as the run's (the first
        one stays its ``environment_id``, every distinct one is listed): returns its id.
        ``state``: "running" takes the run over again for ``--resume`` (RunInProgress while
        its supervisor is alive); "complete" or "interrupted" finishes it."""
        env_id = None
        if environment is not None:
            env_id = self._put_environment(environment)
            linked = self.__dict__.setdefault("_linked", set())
            if (run_id, env_id) not in linked:  # a worker's every result names its environment
                self._set_environment(run_id, env_id)
                linked.add((run_id, env_id))
        if state == "running":
            self._reopen_run(run_id)
        elif state is not None:
            self._finish_run(run_id, state)
        return env_id

    # -- reads: one per question ------------------------------------------------------------------
    def runs(
        self,
        *,
        device: str | None = None,
        suite: str | None = None,
        labels: dict[str, str] | None = None,
        complete: bool | None = None,
        latest: bool = False,
    ) -> list[dict]:
        """Which runs: newest first, each with ``counts`` (status -> results) and ``planned``
        (the plan's length) in place of the plan. Selected (``device``, ``suite``,
        ``labels``, ``complete``: only runs that finished), each only ``id, state, device,
        suite, labels``. ``latest``: the newest run alone (StoreError when there is none)."""
        if latest:
            return [{"id": self._latest_run_id()}]
        if device is None and suite is None and not labels and complete is None:
            return self._list_runs()
        ids = self._find_runs(device=device, suite=suite, labels=labels, complete=bool(complete))
        return [{"id": run_id} for run_id in ids]

    def results(
        self,
        *,
        run_id: str | None = None,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        stream: bool = False,
        order: str = "id",
        with_ops: bool = False,
        count: bool = False,
        by_run: bool = False,
        keys: bool = False,
    ) -> Any:
        """Which results: filtered, in recorded order, one page (``limit`` None: all).
        ``case_glob`` is fnmatch syntax, answered from an index when it has a fixed prefix.
        ``stream``: every match one at a time (never all in memory), in ``order`` ("id" or
        "case": case, mode), ``with_ops``: each with its op table as ``ops``.

        How many: ``count``: the number of matches; ``by_run``: run id -> matches, for every
        run at once (runs with none left out); ``keys``: the set of (case, mode) pairs
        ``run_id`` recorded (what a resume skips)."""
        filters = {
            "run_id": run_id,
            "status": status,
            "case_glob": case_glob,
            "fallback_op": fallback_op,
        }
        if keys:
            if run_id is None:
                raise ValueError("keys: the pairs of one run (run_id)")
            return self._done_items(run_id)
        if by_run:
            del filters["run_id"]
            return self._count_results_by_run(**filters)
        if count:
            return self._count_results(**filters)
        if stream:
            return self._results_stream(**filters, order=order, with_ops=with_ops)
        return self._results_page(**filters, limit=limit, offset=offset)

    def search(
        self,
        text: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
        notes: bool = False,
    ) -> Any:
        """Full text over case ids, error messages and tracebacks: every word, whole
        (``word*`` for a prefix); user text is never other syntax. Best first: the newest
        matches ranked by relevance, then older ones newest first. ``count``: how many
        match; ``notes``: the matching notes instead (a page of 50 unless ``limit``)."""
        if count:
            return self._count_search(text)
        if notes:
            return self._search_notes(text, limit=50 if limit is None else limit, offset=offset)
        return self._search(text, limit=limit, offset=offset)

    def failures(
        self,
        run_id: str,
        *,
        worst_first: bool = False,
        limit: int = 10,
        examples: int = 3,
        count: bool = False,
    ) -> Any:
        """A run's failures grouped by (status, stage, error signature): ``status, stage,
        signature, count, examples`` (case, mode) and the first one's ``message``, most
        common first, or worst first (records/status.py FAILURE_SEVERITY). ``count``: how
        many groups."""
        if count:
            return self._count_failure_groups(run_id)
        return self._failure_groups(run_id, worst_first=worst_first, limit=limit, examples=examples)

    def headline(self, run_id: str | None = None, *, figures: bool = False) -> dict:
        """Per run (every run, or ``run_id``): ``statuses`` {status: n}, ``grades`` {grade:
        n}, ``host_results`` (graded fallback or host) and ``host_ops`` {op: evidence class or
        None}, ``host_op_results`` (views/headline.py). ``figures`` (with ``run_id``): its
        median cold compile wait and median compiled speedup with their counts, instead
        (``compile_wait_s``, ``compiled``, ``speedup``, ``timed_pairs``)."""
        if figures:
            if run_id is None:
                raise ValueError("figures: the medians of one run (run_id)")
            return self._headline_figures(run_id)
        return self._headline_counts(run_id)

    def statuses(
        self,
        run_id: str,
        *,
        shape: Callable[[Iterable[tuple]], Any] | None = None,
        outcomes: bool = False,
    ) -> Any:
        """A run's results in (case, mode) order, lean, from the outcomes index alone.
        ``shape``: called on plain rows ``(case, mode, status, stage, perf_median_ms,
        perf_p10_ms, perf_p90_ms, perf_samples)`` (a baseline, a gate) of each part of a
        large run's cases, one a core, the later parts in forked children (kb/forked.py):
        what it returned for each, in case order. ``outcomes``: an iterator of outcome dicts
        instead (``case, mode, status, stage, grade, figures, host_ops, error_line``)."""
        if outcomes:
            return self._outcomes(run_id)
        if shape is None:
            raise ValueError("statuses: a shape for the rows, or outcomes=True")
        first, theirs = forked.spread(
            self._case_parts(run_id, forked.workers()),
            lambda cases: shape(self._statuses_rows(run_id, cases=cases)),
            lambda cases: _shaped_apart(self, run_id, shape, cases),
        )
        return [first, *theirs]

    def history(self, device: str | None = None, cases: list[str] | None = None) -> dict[str, str]:
        """Newest status per case, eager mode first; ``cases``: only these (indexed lookups)."""
        return self._last_status_by_case(device, cases)


def _shaped_apart(store: Surface, run_id: str, shape: Callable, cases) -> Any:
    """In a forked child: one part's rows shaped, read on connections of its own."""
    with store._reopened() as own:
        return shape(own._statuses_rows(run_id, cases=cases))
