"""torchport import FILE: merge exported runs, or a whole other knowledge base (an SQLite file
or a database URL), into this knowledge base."""

import click

from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    store_problems,
)


@click.command("import")
@click.argument("path", metavar="SOURCE")
@db_option
@json_option
def command(path, db, as_json):
    """Import runs from an export file, or every run of another knowledge base (an SQLite
    file such as a laptop's torchport.db, or a postgresql:// URL): a run already here with the
    same content is skipped, one with different content refuses the whole import; notes are
    merged."""
    import os
    import signal

    from torchport.interfaces.cli import UsageProblem
    from torchport.kb.exchange import import_file, prepared

    if "://" not in path and not os.path.isfile(path):
        raise UsageProblem(
            f"no export file or knowledge base '{path}'; make one with 'torchport export "
            "RUN -o FILE', or pass a torchport .db file or a database URL"
        )

    def terminated(signum, frame):
        raise SystemExit(128 + signum)  # unwinds: the transaction rolls back, temp files go

    before = signal.signal(signal.SIGTERM, terminated)
    try:
        # The source is read and checked whole before the knowledge base is opened for
        # writing, so a bad file creates no database file and changes none.
        with store_problems(), prepared(path) as (source, checked):
            store = open_db(db, write=True)
            report = import_file(store, source, checked)
    finally:
        signal.signal(signal.SIGTERM, before)
    if as_json:
        echo_json(report.to_dict())
        return
    from torchport.interfaces.formats import safe

    for run_id, n in report.added.items():
        click.echo(f"added run {safe(run_id)} ({n} results)")
    for run_id in report.present:
        click.echo(f"run {safe(run_id)} already present with the same content: skipped")
    click.echo(
        f"{len(report.added)} runs added, {len(report.present)} already present, "
        f"{report.notes_added} notes added"
    )
