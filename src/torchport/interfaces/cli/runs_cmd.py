"""torchport runs: the runs in the knowledge base."""

import click

from torchport.interfaces.cli.common import db_option, echo_json, json_option, open_db


@click.command("runs")
@db_option
@json_option
def command(db, as_json):
    """List recorded runs, newest first."""
    runs = open_db(db).list_runs()
    if as_json:
        echo_json(runs)
        return
    from torchport.interfaces.render import make_console
    from rich.table import Table
    table = Table(title=f"{len(runs)} runs", title_justify="left")
    for column in ("run", "started", "state", "suite", "device", "results", "labels"):
        table.add_column(column, overflow="fold")
    for run in runs:
        counts = ", ".join(f"{s} {n}" for s, n in sorted(run["counts"].items()))
        labels = ", ".join(f"{k}={v}" for k, v in run["labels"].items())
        table.add_row(run["id"], run["started_at"], run["state"], run["suite"], run["device"],
                      f"{sum(run['counts'].values())}/{len(run['plan'])}: {counts}", labels)
    make_console().print(table)
