"""Options and helpers shared by subcommands."""

from __future__ import annotations

import contextlib
import functools
import gc

import click

from torchport.interfaces.cli import UsageProblem

db_option = click.option(
    "--db",
    "db",
    default=None,
    metavar="PATH|URL",
    help="Knowledge base: a file, or postgresql://user@host/db for a team's server "
    "(default ./torchport.db or $TORCHPORT_DB).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def bulk_read(command):
    """A command that reads a run's rows once and ends (compare, export, baseline save,
    gate) runs with the cyclic garbage collector paused. What it builds holds no cycle (rows,
    dicts, lists, freed by their counts), so the collector's passes over it, every 700 new
    objects and over all of them as they pile up, find nothing: at a million results they
    were 4-8% of these commands (0.04 s of compare --json, 0.07 s of an export, timed by
    gc.callbacks). The process ends after the command; a server never pauses it."""

    @functools.wraps(command)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return command(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


@contextlib.contextmanager
def problems():
    """Turn the library's bad-input errors into one clear line and exit code 2."""
    from torchport.cases.registry import NoMatchingCases, UnknownSuite
    from torchport.cases.workload import WorkloadError
    from torchport.config import ConfigError
    from torchport.devices import UnknownDevice
    from torchport.kb import StoreError
    from torchport.probes.registry import UnknownProbe
    from torchport.views import ViewError

    try:
        yield
    except (
        StoreError,
        ConfigError,
        UnknownSuite,
        NoMatchingCases,
        UnknownDevice,
        WorkloadError,
        UnknownProbe,
        ViewError,
    ) as exc:
        raise UsageProblem(str(exc)) from None


@contextlib.contextmanager
def store_problems():
    """``problems()`` for the read commands: only the store's and the views' errors, so they
    import neither torch nor the runner."""
    from torchport.kb import StoreError
    from torchport.views import ViewError

    try:
        yield
    except (StoreError, ViewError) as exc:
        raise UsageProblem(str(exc)) from None


def open_db(db: str | None, *, write: bool = False, check_tables: tuple[str, ...] | None = None):
    """The knowledge base for a command: read-only unless ``write`` (``check_tables``: the
    only tables the command writes, checked alone)."""
    from torchport.kb import open_store

    with store_problems():
        return open_store(db, write=write, check_tables=check_tables)


def _jsonable(value):
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()  # a View: its values, numbers as numbers
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)


def echo_json(data, *, flat_from: int | None = None) -> None:
    """``data`` as indented JSON; ``flat_from``: values at this depth and deeper on one line
    each (interfaces/json_text.py: encoded in C, for documents of 100 000 entries)."""
    from torchport.interfaces.json_text import dumps, indented

    if flat_from is None:  # json.dumps(data, indent=2)'s text
        click.echo(indented(data, indent=2, default=_jsonable))
        return
    # color=True: written as it is (JSON text holds no terminal escape, its encoder writes
    # \u001b; click would otherwise search 10 MB for escapes to strip when piped)
    click.echo(dumps(data, indent=2, flat_from=flat_from, default=_jsonable), color=True)


def json_entry(depth: int | None = None):
    """A list entry's text as ``echo_json`` writes it, made by a caller apart (in forked
    children) and given back wrapped in json_text.Raw: ``depth`` None, as
    ``echo_json(data, flat_from=...)`` writes a flat value (one line); else as
    ``echo_json(data)`` writes a value at that depth (indented)."""
    from torchport.interfaces.json_text import indented_at, one_line

    if depth is None:
        return one_line(default=_jsonable)
    return indented_at(depth, indent=2, default=_jsonable)


def made_raw(items: list) -> list:
    """A list's entries made text apart (``json_entry``) marked to be written as they are."""
    from torchport.interfaces.json_text import Raw

    return [Raw(item) if type(item) is str else item for item in items]


def public_result(result: dict) -> dict:
    """The JSON shape of a result (at least run_id, case, mode, status, stage, metrics, error)."""
    return {
        k: result.get(k)
        for k in (
            "run_id",
            "case",
            "case_version",
            "mode",
            "status",
            "stage",
            "grade",
            "metrics",
            "durations",
            "findings",
            "artifacts",
            "error",
            "probe_versions",
            "started_at",
            "finished_at",
        )
    }


def split_csv(values) -> tuple[str, ...]:
    out = []
    for value in values or ():
        out += [v.strip() for v in value.split(",") if v.strip()]
    return tuple(out)


def parse_labels(values) -> dict:
    """``("release=2.14", "team=core")`` -> a dict; bad input is one line, exit 2."""
    labels = {}
    for value in values or ():
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise UsageProblem(f"--label '{value}' must look like key=value")
        labels[key] = val
    return labels


def selector_options(fn):
    """``--device``/``--suite``/``--label``: the latest complete run matching, for every RUN
    argument given as a selector (or left out)."""
    fn = click.option(
        "--label",
        "labels",
        multiple=True,
        metavar="KEY=VALUE",
        help="Only runs with this label (repeatable).",
    )(fn)
    fn = click.option("--suite", "suite", default=None, help="Only runs of this suite.")(fn)
    return click.option("--device", "device", default=None, help="Only runs on this device.")(fn)


def run_filters(device, suite, labels) -> dict:
    filters = parse_labels(labels)
    if device:
        filters["device"] = device
    if suite:
        filters["suite"] = suite
    return filters


def resolve(store, spec, filters) -> str:
    """A run id from an id, ``latest`` or a selector (torchport.views.selection)."""
    from torchport.views.selection import resolve_run

    with store_problems():
        return resolve_run(store, spec, filters)
