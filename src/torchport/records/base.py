"""The store interface: what every knowledge-base engine provides, and its errors.

To add an engine (PostgreSQL, say): write a class with these methods in its own module, give
``records.store.open_store`` a URL scheme for it, and run ``tests/records`` against it. Callers
(the api's single writer, the read commands, views) see only this protocol; none of them
reaches into a connection.

Reads return plain dicts: a run (``id, started_at, finished_at, state, host, pid, command,
suite, device, config, plan, labels, environment_id, environment_ids``) and a result
(``run_id, case, case_version, mode, status, stage, grade, metrics, findings, durations,
artifacts, error, probe_versions, started_at, finished_at``). Never imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from torchport import settings
from torchport.records.result import Recorded, Result

RUN_STATES = ("running", "complete", "interrupted")


class StoreError(Exception):
    """A knowledge base that cannot be used, with a one-line message that says what to do."""


class OlderSchema(StoreError):
    """A read of a knowledge base of an older schema: refused, with the one command that brings
    it up to date (``torchport migrate``); reads never change the schema (docs/design.md)."""

    def __init__(self, message: str, *, where: str, version: int):
        super().__init__(message)
        self.where, self.version = where, version


class NoWriteAccess(StoreError):
    """A write refused because this user may not change the knowledge base (a read-only file,
    a PostgreSQL role without the rights); ``said``: the engine's own words."""

    def __init__(self, message: str, *, said: str):
        super().__init__(message)
        self.said = said


class DuplicateResult(StoreError):
    """The run already holds a result for this (case, mode)."""


class RunInProgress(StoreError):
    """``reopen_run`` on a run whose supervisor is still alive."""


def default_db_path() -> str:
    return settings.value("TORCHPORT_DB") or "torchport.db"


@runtime_checkable
class Store(Protocol):
    """A knowledge base. Opened with ``open_store(url, write=...)``; a read-only store raises
    StoreError on every write method."""

    url: str
    read_only: bool

    # -- writes: one writer per run; each call commits at once -------------------------------
    def put_environment(self, data: dict) -> str:
        """Store a fingerprint once (content-addressed); return its id."""

    def create_run(
        self,
        *,
        run_id: str,
        command: str,
        suite: str,
        device: str,
        config: dict,
        plan: list,
        labels: dict,
    ) -> None: ...

    def reopen_run(self, run_id: str) -> None:
        """Mark a run live again for ``--resume``; RunInProgress if its supervisor is alive."""

    def set_environment(self, run_id: str, env_id: str) -> None:
        """Record the environment a worker of the run reported. The first one stays the run's
        ``environment_id``; every distinct one is kept in ``environment_ids``."""

    def finish_run(self, run_id: str, state: str) -> None: ...

    def add_result(self, run_id: str, result: Result | Recorded | dict) -> int:
        """Commit one result with its op table; DuplicateResult if the run has one for that
        (case, mode). A dict is validated first (``Result.from_dict``: MalformedResult); a
        ``Result`` is a value already validated where it entered the driver (api.checked)."""

    # -- batched writes (imports, bulk loads) --------------------------------------------------
    def transaction(self) -> AbstractContextManager[None]:
        """Writes inside commit together, or none does (an import is all or nothing)."""

    def add_results(self, run_id: str, results: Iterable[Result | Recorded | dict]) -> int:
        """Many results in one transaction; a ``Recorded`` (an import, validated where it
        entered) or a dict carries ``finished_at`` and its recorded ``ops`` rows (kept).
        Returns how many."""

    def put_run(self, run: dict) -> None:
        """A run as recorded elsewhere (import): id, started_at, finished_at, state, host,
        command, suite, device, config, plan, labels, environment_ids (already stored)."""

    def put_artifacts(self, run_id: str, artifacts: Iterable[dict]) -> None:
        """Content hashes of files the run's results point at: path, sha256, bytes."""

    # -- decisions -----------------------------------------------------------------------------
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
        """A note on a run or on one case (and mode) of it; StoreError if the run or case is
        not there. With ``created_at`` (an import), an identical note is not added twice."""

    def notes(self, *, run_id: str | None = None, case: str | None = None) -> list[dict]:
        """``id, run_id, case, mode, author, text, created_at``, oldest first."""

    def search_notes(self, text: str, *, limit: int | None = 50, offset: int = 0) -> list[dict]: ...

    def artifacts(self, run_id: str) -> list[dict]: ...

    # -- reads ---------------------------------------------------------------------------------
    def get_run(self, run_id: str, *, plan: bool = True) -> dict:
        """``plan=False``: ``planned`` (the plan's length) in place of the plan, which holds
        100 000 entries in a large sweep."""

    def latest_run_id(self) -> str: ...

    def list_runs(self) -> list[dict]:
        """Newest first, each with ``counts`` (status -> results) and ``planned`` (the plan's
        length) in place of the plan."""

    def find_runs(
        self,
        *,
        device: str | None = None,
        suite: str | None = None,
        labels: dict[str, str] | None = None,
        complete: bool = True,
    ) -> list[str]:
        """Ids of matching runs, newest first; ``complete``: only runs that finished."""

    def environment(self, env_id: str | None) -> dict: ...

    def done_items(self, run_id: str) -> set[tuple[str, str]]: ...

    def results(
        self,
        *,
        run_id: str | None = None,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Filtered, in recorded order, one page (``limit`` None: all). ``case_glob`` is
        fnmatch syntax, answered from an index when it has a fixed prefix."""

    def iter_results(
        self,
        *,
        run_id: str | None = None,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
        order: str = "id",
        with_ops: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """The same results streamed (never all in memory). ``order``: "id" or "case" (case,
        mode); ``with_ops``: each carries its op table as ``ops``."""

    def iter_result_lines(
        self, run_id: str, ids: tuple[int, int] | None = None
    ) -> Iterator[tuple[str | None, dict[str, Any] | None, list[Any]]]:
        """A run's results for an export file in recorded order: (line, None, artifacts)
        where the database built the line, else (None, the result with ``ops``, artifacts).
        ``ids``: one of ``line_parts``."""

    def line_parts(self, run_id: str, parts: int) -> list[tuple[int, int] | None]:
        """A run's results cut into up to ``parts`` ranges of ids for ``iter_result_lines``
        (one part, None, for a small run)."""

    def reopened(self) -> Store:
        """The same knowledge base, read-only, on connections of its own: a forked child's
        (records/forked.py), since a connection never crosses a fork."""

    def iter_outcomes(self, run_id: str) -> Iterator[dict[str, Any]]:
        """A run's results in (case, mode) order, lean (compare): ``case, mode, status, stage,
        grade, figures`` (records/figures.py KEY_FIGURES present), ``host_ops`` (dict or None),
        ``error_line``."""

    def iter_statuses(
        self, run_id: str, cases: tuple[str | None, str | None] | None = None
    ) -> Iterator[tuple]:
        """A run's results in (case, mode) order as plain rows (baseline, gate): ``(case,
        mode, status, stage, perf_median_ms, perf_p10_ms, perf_p90_ms, perf_samples)``;
        ``cases``: one of ``case_parts``."""

    def compare_pairs(
        self,
        run_a: str,
        run_b: str,
        *,
        parity_factor: float,
        compile_ratio: float,
        memory_ratio: float,
        min_samples: int,
        min_change: float,
        cases: tuple[str | None, str | None] | None = None,
        counted: bool = True,
    ) -> dict:
        """Two runs joined by (case, mode): ``pairs`` (outcome A, outcome B, decisions) for a
        superset of the pairs that show a change past the given lines (``decisions``, the
        names of what holds of the pair, records/queries.py decided_names: the status lists,
        the placement candidate, each FigureRule past its line, the step-time verdict, decided
        by the store from the declared rules; the caller only formats), and ``tally()``, to
        call once they are read: ``counts`` {(status A, status B): [pairs, pairs timed on both
        sides]}, ``only_a``, ``only_b``. ``cases``: the pairs of one of ``case_parts`` only
        (the tally of all); ``counted=False``: no tally."""

    def case_parts(self, run_a: str, parts: int) -> list[tuple[str | None, str | None]]:
        """A comparison with run A cut into up to ``parts`` ranges of A's case ids (one,
        (None, None), for a small run)."""

    def compare_lists(
        self,
        run_a: str,
        run_b: str,
        *,
        parity_factor: float,
        compile_ratio: float,
        memory_ratio: float,
        min_samples: int,
        min_change: float,
        limit: int,
        only: tuple[str, ...] | None = None,
        after: dict | None = None,
    ) -> dict:
        """A comparison's counts and the first ``limit`` pairs of each of its lists, decided
        by the database: ``counts`` as compare_pairs', ``decided`` {decision: pairs},
        ``only_a``, ``only_b`` and ``lists`` {list: [(outcome A, outcome B, decisions)]} (every
        placement candidate is listed; host-op sets are compared by the caller); ``only``:
        just these lists (decision names, ``perf``); ``after``: each list from the pair after
        this one (``case``, ``mode``, ``metric``: a figure's place in its list, ``gap``)."""

    def count_results(
        self,
        *,
        run_id: str | None = None,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
    ) -> int: ...

    def count_results_by_run(
        self,
        *,
        status: str | None = None,
        case_glob: str | None = None,
        fallback_op: str | None = None,
    ) -> dict[str, int]:
        """``count_results`` for every run at once: run id -> matching results (runs with
        none are left out)."""

    def search(
        self, text: str, *, limit: int | None = None, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Full text over case ids, error messages and tracebacks: every word, whole (``word*``
        for a prefix); user text is never other syntax. Best first: the newest matches ranked
        by relevance (bm25, a case-id hit first), then older ones newest first."""

    def count_search(self, text: str) -> int: ...

    def status_counts(self, run_id: str) -> dict[str, int]: ...

    def failure_groups(
        self, run_id: str, *, worst_first: bool = False, limit: int = 10, examples: int = 3
    ) -> list[dict]:
        """Failures grouped by (status, stage, error signature): ``status, stage, signature,
        count, examples`` (case, mode) and the first one's ``message``."""

    def count_failure_groups(self, run_id: str) -> int: ...

    def headline_counts(self, run_id: str | None = None) -> dict[str, dict]:
        """Per run: ``statuses``, ``grades``, ``host_results`` (graded fallback or host) and
        ``host_ops`` {op: evidence class or None} (views/headline.py)."""

    def headline_figures(self, run_id: str) -> dict:
        """A run's median cold compile wait and median compiled speedup, with their counts:
        ``compile_wait_s``, ``compiled``, ``speedup``, ``timed_pairs``."""

    def last_status_by_case(
        self, device: str | None = None, cases: list[str] | None = None
    ) -> dict[str, str]:
        """Newest status per case, eager mode first; ``cases``: only these (indexed lookups)."""

    def schema_version(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...
