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

import os
from typing import Any, Protocol, runtime_checkable

from torchport.records.result import Result

RUN_STATES = ("running", "complete", "interrupted")


class StoreError(Exception):
    """A knowledge base that cannot be used, with a one-line message that says what to do."""


class DuplicateResult(StoreError):
    """The run already holds a result for this (case, mode)."""


class RunInProgress(StoreError):
    """``reopen_run`` on a run whose supervisor is still alive."""


def default_db_path() -> str:
    return os.environ.get("TORCHPORT_DB") or "torchport.db"


@runtime_checkable
class Store(Protocol):
    """A knowledge base. Opened with ``open_store(url, write=...)``; a read-only store raises
    StoreError on every write method."""

    url: str
    read_only: bool

    # -- writes: one writer per run; each call commits at once -------------------------------
    def put_environment(self, data: dict) -> str:
        """Store a fingerprint once (content-addressed); return its id."""

    def create_run(self, *, run_id: str, command: str, suite: str, device: str, config: dict,
                   plan: list, labels: dict) -> None: ...

    def reopen_run(self, run_id: str) -> None:
        """Mark a run live again for ``--resume``; RunInProgress if its supervisor is alive."""

    def set_environment(self, run_id: str, env_id: str) -> None:
        """Record the environment a worker of the run reported. The first one stays the run's
        ``environment_id``; every distinct one is kept in ``environment_ids``."""

    def finish_run(self, run_id: str, state: str) -> None: ...

    def add_result(self, run_id: str, result: Result | dict) -> int:
        """Validate (``Result.from_dict``: MalformedResult) and commit one result with its op
        table; DuplicateResult if the run has one for that (case, mode)."""

    # -- reads ---------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> dict: ...

    def latest_run_id(self) -> str: ...

    def list_runs(self) -> list[dict]:
        """Newest first, each with ``counts`` (status -> results)."""

    def environment(self, env_id: str | None) -> dict: ...

    def done_items(self, run_id: str) -> set[tuple[str, str]]: ...

    def results(self, *, run_id: str | None = None, status: str | None = None,
                case_glob: str | None = None, fallback_op: str | None = None
                ) -> list[dict[str, Any]]: ...

    def search(self, text: str) -> list[dict[str, Any]]:
        """Full text over case ids, error messages and tracebacks; user text is never syntax."""

    def last_status_by_case(self, device: str | None = None) -> dict[str, str]: ...

    def schema_version(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...
