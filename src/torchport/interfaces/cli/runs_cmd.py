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
    """List recorded runs, newest first, each with its headline: passed, accuracy failures,
    host fallbacks, compile wait and median compiled speedup."""
    from torchport.views.headline import run_headlines

    with store_problems():
        store = open_db(db)
        runs = store.runs()
        headlines = run_headlines(store, runs)
    if as_json:
        echo_json([run | {"headline": headlines[run["id"]].to_dict()} for run in runs])
        return
    from torchport.interfaces.render import make_console, print_view
    from torchport.views.listing import runs_view

    print_view(make_console(), runs_view(runs, headlines))
