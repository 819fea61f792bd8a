"""torchport results: query results across runs, a page at a time."""

import click

from torchport.interfaces.bounds import MAX_LIMIT, MAX_OFFSET
from torchport.interfaces.cli.common import (
    db_option,
    json_option,
    open_db,
    public_result,
    store_problems,
)

DEFAULT_LIMIT = 200


def echo_json_stream(items) -> None:
    """A JSON array written item by item: a page of any size never sits in memory twice."""
    import json

    first = True
    click.echo("[", nl=False)
    for item in items:
        click.echo(("\n" if first else ",\n") + json.dumps(item, indent=2, default=str), nl=False)
        first = False
    click.echo("\n]" if not first else "]")


@click.command("results")
@click.option("--run", "run_id", default=None)
@click.option("--status", default=None)
@click.option("--case", "case_glob", default=None, help="Case id glob (fnmatch syntax).")
@click.option("--fallback-op", default=None, help="Only results that ran this op on the host.")
@click.option(
    "--limit",
    default=None,
    type=click.IntRange(0, MAX_LIMIT),
    help=f"Results per page (0: every one; default {DEFAULT_LIMIT} in the table, "
    "every one, streamed, with --json).",
)
@click.option(
    "--offset", default=0, type=click.IntRange(0, MAX_OFFSET), help="Skip this many results."
)
@db_option
@json_option
def command(run_id, status, case_glob, fallback_op, limit, offset, db, as_json):
    """List results, filtered, in recorded order."""
    from torchport.interfaces.cli import UsageProblem
    from torchport.records import RESULT_STATUSES

    if status and status not in RESULT_STATUSES:
        raise UsageProblem(f"unknown status '{status}'; choose from {', '.join(RESULT_STATUSES)}")
    store = open_db(db)
    filters = {
        "run_id": run_id,
        "status": status,
        "case_glob": case_glob,
        "fallback_op": fallback_op,
    }
    with store_problems():
        if run_id:
            store.get_run(run_id, plan=False)
        if as_json:
            if not limit and not offset:  # every result, streamed
                echo_json_stream(public_result(r) for r in store.results(**filters, stream=True))
            else:
                page = store.results(**filters, limit=limit or None, offset=offset)
                echo_json_stream(public_result(r) for r in page)
            return
        total = store.results(**filters, count=True)
        limit = DEFAULT_LIMIT if limit is None else limit
        page = store.results(**filters, limit=limit or None, offset=offset)
    from torchport.interfaces.render import make_console, print_view
    from torchport.views.listing import results_view

    view = results_view(page)
    if len(page) < total:
        view.title = f"results {offset + 1}-{offset + len(page)} of {total}"
        if offset + len(page) < total:
            view.notes.append(
                f"{total - offset - len(page)} more; --offset "
                f"{offset + len(page)} for the next page, --limit 0 for all"
            )
    print_view(make_console(), view)
