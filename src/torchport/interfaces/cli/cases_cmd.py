"""torchport cases SUITE: the cases of a suite, with tags and the last recorded status."""

import click

from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    problems,
    store_problems,
)


def _last_status(db: str | None, cases: list[str]) -> dict[str, str]:
    """Statuses from the knowledge base (indexed lookups for these cases only): ``--db`` must
    be one; the default may be absent."""
    import os

    from torchport.kb import default_db_path

    if db is None and not os.path.exists(default_db_path()):
        return {}
    with store_problems():
        return open_db(db).history(cases=cases)


def _sized(case) -> dict:
    """``describe()`` plus its size: parameters for a model case, sample inputs for an op case."""
    row = case.describe()
    for key, method in (("params", "param_count"), ("samples", "sample_count")):
        if hasattr(case, method):
            try:
                row[key] = getattr(case, method)()
            except Exception as exc:  # a case that cannot even be sized says so
                row[key] = f"error: {type(exc).__name__}"
    return row


@click.command("cases")
@click.argument("suite")
@click.option("--params", is_flag=True, help="Count parameters (meta device; slower).")
@db_option
@json_option
def command(suite, params, db, as_json):
    """List the cases of SUITE."""
    from torchport.cases.registry import describe_suite, load_suite

    if db is not None:
        open_db(db)  # a wrong --db fails before the suite is loaded
    with problems():
        rows = [_sized(case) for case in load_suite(suite)] if params else describe_suite(suite)
    last = _last_status(db, [row["case"] for row in rows])
    for row in rows:
        row["last_status"] = last.get(row["case"])
    if as_json:
        echo_json(rows)
        return
    from torchport.interfaces.render import make_console, print_view
    from torchport.views.listing import cases_view

    print_view(make_console(), cases_view(suite, rows, params=params))
