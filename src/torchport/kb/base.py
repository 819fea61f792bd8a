"""The store interface: what every knowledge-base engine provides, and its errors.

To add an engine (PostgreSQL, say): write a class with these methods in its own module, give
``kb.store.open_store`` a URL scheme for it, and run ``tests/store`` against it. Callers
(the api's single writer, the read commands, views) see only this protocol; none of them
reaches into a connection.

Reads return plain dicts: a run (``id, started_at, finished_at, state, host, pid, command,
suite, device, config, plan, labels, environment_id, environment_ids``) and a result
(``run_id, case, case_version, mode, status, stage, grade, metrics, findings, durations,
artifacts, error, probe_versions, started_at, finished_at``). Never imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable
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
    StoreError on every write method. Its writes, then one read per question the tool asks
    (kb/surface.py; the export and import of kb/exchange.py use the engine's own
    reads inside the knowledge base)."""

    url: str
    read_only: bool

    # -- writes: one writer per run; each call commits at once -------------------------------
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

    def update_run(
        self, run_id: str, *, state: str | None = None, environment: dict | None = None
    ) -> str | None:
        """``environment``: a fingerprint a worker reported, stored once and recorded as the
        run's (the first stays its ``environment_id``): its id. ``state``: "running" takes
        the run over for ``--resume`` (RunInProgress while its supervisor is alive);
        "complete" or "interrupted" finishes it."""

    def add_results(self, run_id: str, results: Iterable[Result | Recorded | dict]) -> int:
        """Results in one transaction, each with its op table; DuplicateResult if the run has
        one for a (case, mode). A dict is validated first (``Result.from_dict``:
        MalformedResult); a ``Result`` is a value already validated where it entered the
        driver (api.checked); a ``Recorded`` one an import validated. Returns how many."""

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

    def close(self) -> None: ...

    # -- reads: one per question ----------------------------------------------------------------
    def get_run(self, run_id: str, *, plan: bool = True, environments: bool = False) -> dict:
        """One run. ``plan=False``: ``planned`` (the plan's length) in place of the plan;
        ``environments``: its environments' fingerprints as ``environments``."""

    def runs(
        self,
        *,
        device: str | None = None,
        suite: str | None = None,
        labels: dict[str, str] | None = None,
        complete: bool | None = None,
        latest: bool = False,
    ) -> list[dict]:
        """Which runs, newest first, with ``counts`` and ``planned``; selected by device,
        suite, labels or ``complete`` (only ``id``); ``latest``: the newest alone."""

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
        """Which results (a page, or ``stream``ed), or how many (``count``, ``by_run``), or
        which (case, mode) pairs a run recorded (``keys``)."""

    def search(
        self,
        text: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
        notes: bool = False,
    ) -> Any:
        """Full text over case ids, error messages and tracebacks, best first; ``count``:
        how many; ``notes``: the matching notes."""

    def failures(
        self,
        run_id: str,
        *,
        worst_first: bool = False,
        limit: int = 10,
        examples: int = 3,
        count: bool = False,
    ) -> Any:
        """A run's failures grouped by (status, stage, error signature); ``count``: how many
        groups."""

    def headline(self, run_id: str | None = None, *, figures: bool = False) -> dict:
        """Per run: statuses, grades and host ops (views/headline.py); ``figures``: one
        run's medians of compile wait and compiled speedup."""

    def statuses(self, run_id: str, *, shape: Any = None, outcomes: bool = False) -> Any:
        """A run's results in (case, mode) order, lean: plain rows ``shape``d in parts (a
        baseline, a gate), or outcome dicts (``outcomes``)."""

    def compare(
        self,
        run_a: str,
        run_b: str,
        *,
        limit: int | None = None,
        only: tuple[str, ...] | None = None,
        after: dict | None = None,
        shape: Any = None,
        lines: dict | None = None,
        unless: tuple | None = None,
    ) -> dict:
        """Two runs compared in one read (kb/reads/compare.py): the runs, environments,
        notes, transition and decision counts, the pairs that show a change (each list's first
        ``limit`` with a limit) shaped by ``shape`` in parts, the unpaired keys, each run's
        placement counts, dist results and audited results, and the ``version`` of both runs
        it was read from; ``unless`` that version, the runs and their notes alone."""

    def history(self, device: str | None = None, cases: list[str] | None = None) -> dict[str, str]:
        """Newest status per case, eager mode first; ``cases``: only these."""

    def notes(self, *, run_id: str | None = None, case: str | None = None) -> list[dict]:
        """``id, run_id, case, mode, author, text, created_at``, oldest first."""

    def schema_version(self) -> int: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...
