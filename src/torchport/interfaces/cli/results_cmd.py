"""torchport results: query results across runs."""

import click

from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    public_result,
    store_problems,
)


def print_results(results) -> None:
    from torchport.interfaces.render import make_console, print_view
    from torchport.views.listing import results_view
    print_view(make_console(), results_view(results))


@click.command("results")
@click.option("--run", "run_id", default=None)
@click.option("--status", default=None)
@click.option("--case", "case_glob", default=None, help="Case id glob.")
@click.option("--fallback-op", default=None, help="Only results that ran this op on the host.")
@db_option
@json_option
def command(run_id, status, case_glob, fallback_op, db, as_json):
    """List results, filtered."""
    from torchport.interfaces.cli import UsageProblem
    from torchport.records import RESULT_STATUSES
    if status and status not in RESULT_STATUSES:
        raise UsageProblem(f"unknown status '{status}'; choose from {', '.join(RESULT_STATUSES)}")
    store = open_db(db)
    with store_problems():
        if run_id:
            store.get_run(run_id)
        results = store.results(run_id=run_id, status=status, case_glob=case_glob,
                                fallback_op=fallback_op)
    if as_json:
        echo_json([public_result(r) for r in results])
    else:
        print_results(results)
