"""torchport runs: the runs in the knowledge base."""

import click

from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    store_problems,
)


@click.command("runs")
@db_option
@json_option
def command(db, as_json):
    """List recorded runs, newest first."""
    with store_problems():
        runs = open_db(db).list_runs()
    if as_json:
        echo_json(runs)
        return
    from torchport.interfaces.render import make_console, print_view
    from torchport.views.listing import runs_view

    print_view(make_console(), runs_view(runs))
