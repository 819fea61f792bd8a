"""torchport show RUN: the matrix, the views and the environment of one run."""

import click

from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    public_result,
    store_problems,
)


@click.command("show")
@click.argument("run_id", required=False)
@click.option("--csv", "csv_view", default=None, metavar="VIEW",
              help="Print one view as CSV (e.g. 'ops', the operator compatibility table).")
@db_option
@json_option
def command(run_id, db, as_json, csv_view):
    """Show one run (default: the latest)."""
    from torchport.views import build_views
    store = open_db(db)
    with store_problems():
        run = store.get_run(run_id or store.latest_run_id())
        results = store.results(run_id=run["id"])
        environments = [store.environment(e) for e in run["environment_ids"]]
        views = build_views(run, results)
    if csv_view:
        _print_csv(views, csv_view)
        return
    if as_json:
        echo_json({"run": run, "environment": environments[0] if environments else {},
                   "environments": environments, "views": views,
                   "results": [public_result(r) for r in results]})
        return
    from torchport.interfaces.render import make_console, print_run_header, print_views
    console = make_console()
    print_run_header(console, run, environments)
    console.print()
    print_views(console, views)


def _print_csv(views: dict, name: str) -> None:
    import csv
    import sys
    from torchport.interfaces.cli import UsageProblem
    if name not in views:
        raise UsageProblem(f"--csv {name}: this run has no view '{name}'; it has "
                           f"{', '.join(views) or 'none'}")
    from torchport.interfaces.formats import cell
    view = views[name]
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(view.names)
    for row in view.rows:  # numbers as numbers; composite values as the table shows them
        writer.writerow([v if isinstance(v, (int, float, str)) or v is None
                         else cell(v, c.kind) for v, c in zip(row, view.columns, strict=True)])
