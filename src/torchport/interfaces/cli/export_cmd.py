"""torchport export RUN... -o file.jsonl: runs with their evidence, for another knowledge base."""

import click

from torchport.interfaces.cli.common import bulk_read, db_option, open_db, resolve, store_problems


@click.command("export")
@click.argument("run_specs", nargs=-1, required=True, metavar="RUN...")
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    metavar="FILE",
    help="The file to write (JSON lines).",
)
@db_option
@bulk_read
def command(run_specs, output, db):
    """Write runs, their environments, results, op tables, notes and artifact hashes.

    RUN is a run id, 'latest' or a selector (device=cpu,release=a)."""
    from torchport.interfaces.cli import UsageProblem
    from torchport.interfaces.output import OutputError, check_target, output_file
    from torchport.kb.exchange import export_runs

    try:
        check_target(output)  # before the store is read: a device or a FIFO is bad input
        store = open_db(db)
        run_ids = [resolve(store, spec, {}) for spec in run_specs]
        # A failed export leaves no file that looks whole, and nothing beside it.
        with output_file(output) as f, store_problems():
            counts = export_runs(store, run_ids, f)
    except OutputError as exc:
        raise UsageProblem(str(exc)) from None
    click.echo(
        f"exported {counts['runs']} runs, {counts['results']} results, "
        f"{counts['notes']} notes, {counts['artifacts']} artifact references to {output}"
    )
