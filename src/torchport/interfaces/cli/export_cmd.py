"""torchport export RUN... -o file.jsonl: runs with their evidence, for another knowledge base."""

import click

from torchport.interfaces.cli.common import db_option, open_db, resolve, store_problems


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
def command(run_specs, output, db):
    """Write runs, their environments, results, op tables, notes and artifact hashes.

    RUN is a run id, 'latest' or a selector (device=cpu,release=a)."""
    import os

    from torchport.interfaces.cli import UsageProblem
    from torchport.records.exchange import export_runs

    store = open_db(db)
    run_ids = [resolve(store, spec, {}) for spec in run_specs]
    partial = f"{output}.part"  # a failed export leaves no file that looks whole
    try:
        f = open(partial, "w", encoding="utf-8")
    except OSError as exc:
        raise UsageProblem(f"cannot write '{output}' ({exc.strerror}); pass another -o") from None
    try:
        with f, store_problems():
            counts = export_runs(store, run_ids, f)
        os.replace(partial, output)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    click.echo(
        f"exported {counts['runs']} runs, {counts['results']} results, "
        f"{counts['notes']} notes, {counts['artifacts']} artifact references to {output}"
    )
