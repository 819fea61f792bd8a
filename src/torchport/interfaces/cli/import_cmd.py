"""torchport import FILE: merge exported runs, a whole other knowledge base (an SQLite file
or a database URL), or a TorchCTS JSON report (as one run), into this knowledge base."""

import click

from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    store_problems,
)
from torchport.kb.exchange import SOURCE_FORMATS


def origin_line(origin: dict) -> str:
    """What a TorchCTS report held and what it became: its tests by TorchCTS's status, the
    results by torchport's."""
    tests = origin["tests"]
    ran = {k: n for k, n in tests.items() if k != "FILTERED" and n}
    results = origin["results"]
    usable = origin.get("usable_only", 0)
    within = f"; {usable} PASS within its usable tolerance only" if usable else ""
    return (
        f"TorchCTS report '{origin['report']}' ({origin['device']}, torch {origin['torch']}): "
        f"{sum(ran.values())} tests ran ({', '.join(f'{n} {k}' for k, n in ran.items())}"
        f"{within}), "
        f"{tests.get('FILTERED', 0)} filtered (never ran) -> {sum(results.values())} results "
        f"({', '.join(f'{n} {k}' for k, n in sorted(results.items(), key=lambda kv: -kv[1]))})"
    )


@click.command("import")
@click.argument("path", metavar="SOURCE")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(SOURCE_FORMATS),
    default="auto",
    show_default=True,
    help="torchport: an export file or a knowledge base; torchcts: a TorchCTS JSON report "
    "(results/<hardware_key>_latest.json or the run under its _history folder); auto tells "
    "them apart by how the file begins.",
)
@db_option
@json_option
def command(path, fmt, db, as_json):
    """Import runs from an export file, or every run of another knowledge base (an SQLite
    file such as a laptop's torchport.db, or a postgresql:// URL), or a TorchCTS JSON report
    as one run (suite torchcts; its tests' statuses mapped onto torchport's, their reasons
    and messages kept: docs/suites/ops.md): a run already here with the same content is
    skipped, one with different content refuses the whole import; notes are merged."""
    import os
    import signal

    from torchport.interfaces.cli import UsageProblem
    from torchport.kb.exchange import import_file, prepared

    if "://" not in path and not os.path.isfile(path):
        raise UsageProblem(
            f"no export file or knowledge base '{path}'; make one with 'torchport export "
            "RUN -o FILE', or pass a torchport .db file, a database URL or a TorchCTS report"
        )
    if fmt == "torchcts" and "://" in path:
        raise UsageProblem(f"'{path}' is a database URL, not a TorchCTS report file")

    def terminated(signum, frame):
        raise SystemExit(128 + signum)  # unwinds: the transaction rolls back, temp files go

    before = signal.signal(signal.SIGTERM, terminated)
    try:
        # The source is read and checked whole before the knowledge base is opened for
        # writing, so a bad file creates no database file and changes none.
        with store_problems(), prepared(path, fmt) as (source, checked):
            store = open_db(db, write=True)
            report = import_file(store, source, checked)
    finally:
        signal.signal(signal.SIGTERM, before)
    if as_json:
        echo_json(report.to_dict())
        return
    from torchport.interfaces.formats import safe

    if report.origin is not None:
        click.echo(safe(origin_line(report.origin)))
    for run_id, n in report.added.items():
        click.echo(f"added run {safe(run_id)} ({n} results)")
    for run_id in report.present:
        click.echo(f"run {safe(run_id)} already present with the same content: skipped")
    click.echo(
        f"{len(report.added)} runs added, {len(report.present)} already present, "
        f"{report.notes_added} notes added"
    )
