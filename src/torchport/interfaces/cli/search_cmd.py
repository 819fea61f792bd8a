"""torchport search TEXT: full-text search over case ids, error messages and tracebacks."""

import click

from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    public_result,
    store_problems,
)


@click.command("search")
@click.argument("text", nargs=-1, required=True)
@db_option
@json_option
def command(text, db, as_json):
    """Find results whose case id, error or traceback mentions TEXT."""
    with store_problems():
        results = open_db(db).search(" ".join(text))
    if as_json:
        echo_json([public_result(r) for r in results])
    else:
        from torchport.interfaces.cli.results_cmd import print_results
        print_results(results)
