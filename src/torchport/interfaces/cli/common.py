"""Options and helpers shared by subcommands."""

from __future__ import annotations

import contextlib
import json

import click

from torchport.interfaces.cli import UsageProblem

db_option = click.option("--db", "db", default=None, metavar="PATH",
                         help="Knowledge base (default ./torchport.db or $TORCHPORT_DB).")
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@contextlib.contextmanager
def problems():
    """Turn the library's bad-input errors into one clear line and exit code 2."""
    from torchport.cases.registry import NoMatchingCases, UnknownSuite
    from torchport.cases.workload import WorkloadError
    from torchport.config import ConfigError
    from torchport.devices import UnknownDevice
    from torchport.probes.registry import UnknownProbe
    from torchport.records import StoreError
    from torchport.views import ViewError
    try:
        yield
    except (StoreError, ConfigError, UnknownSuite, NoMatchingCases, UnknownDevice,
            WorkloadError, UnknownProbe, ViewError) as exc:
        raise UsageProblem(str(exc)) from None


@contextlib.contextmanager
def store_problems():
    """``problems()`` for the read commands: only the store's and the views' errors, so they
    import neither torch nor the runner."""
    from torchport.records import StoreError
    from torchport.views import ViewError
    try:
        yield
    except (StoreError, ViewError) as exc:
        raise UsageProblem(str(exc)) from None


def open_db(db: str | None, *, write: bool = False):
    """The knowledge base for a command: read-only unless ``write``."""
    from torchport.records import open_store
    with store_problems():
        return open_store(db, write=write)


def _jsonable(value):
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()  # a View: its values, numbers as numbers
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)


def echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, default=_jsonable))


def public_result(result: dict) -> dict:
    """The JSON shape of a result (at least run_id, case, mode, status, stage, metrics, error)."""
    return {k: result.get(k) for k in ("run_id", "case", "case_version", "mode", "status",
                                       "stage", "grade", "metrics", "durations", "findings",
                                       "artifacts", "error", "probe_versions", "started_at",
                                       "finished_at")}


def split_csv(values) -> tuple[str, ...]:
    out = []
    for value in values or ():
        out += [v.strip() for v in value.split(",") if v.strip()]
    return tuple(out)
