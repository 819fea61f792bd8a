"""torchport show RUN: the matrix, the views and the environment of one run."""

import click

from torchport.interfaces.cli.common import (
    db_option, echo_json, json_option, open_db, problems, public_result,
)


@click.command("show")
@click.argument("run_id", required=False)
@click.option("--csv", "csv_view", default=None, metavar="VIEW",
              help="Print one view as CSV (e.g. 'ops', the operator compatibility table).")
@db_option
@json_option
def command(run_id, db, as_json, csv_view):
    """Show one run (default: the latest)."""
    from torchport.interfaces.views import build_views
    store = open_db(db)
    with problems():
        run = store.get_run(run_id or store.latest_run_id())
    results = store.results(run_id=run["id"])
    environment = store.environment(run["environment_id"])
    views = build_views(run, results)
    if csv_view:
        _print_csv(views, csv_view)
        return
    if as_json:
        echo_json({"run": run, "environment": environment, "views": views,
                   "results": [public_result(r) for r in results]})
        return
    from torchport.interfaces.render import make_console
    from torchport.interfaces.render import environment_lines, print_views
    console = make_console()
    labels = ", ".join(f"{k}={v}" for k, v in run["labels"].items()) or "-"
    console.print(f"[bold]run {run['id']}[/bold]  {run['state']}  suite {run['suite']}  device "
                  f"{run['device']}  dtype {run['config'].get('dtype')}  labels {labels}")
    console.print(f"command: {run['command']}")
    for line in environment_lines(environment):
        console.print(f"  {line}")
    console.print()
    print_views(console, views)


def _print_csv(views: dict, name: str) -> None:
    import csv
    import sys
    from torchport.interfaces.cli import UsageProblem
    if name not in views:
        raise UsageProblem(f"--csv {name}: this run has no view '{name}'; it has "
                           f"{', '.join(views) or 'none'}")
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(views[name]["columns"])
    writer.writerows(views[name]["rows"])
