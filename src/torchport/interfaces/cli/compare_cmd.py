"""torchport compare A B: what changed between two runs (across devices or releases)."""

import click

from torchport.interfaces.cli.common import (
    bulk_read,
    db_option,
    echo_json,
    json_entry,
    json_option,
    made_raw,
    open_db,
    resolve,
    run_filters,
    selector_options,
    store_problems,
)


@click.command("compare")
@click.argument("run_a", metavar="A")
@click.argument("run_b", metavar="B")
@selector_options
@click.option("--all", "show_all", is_flag=True, help="Every row of every list.")
@db_option
@json_option
@bulk_read
def command(run_a, run_b, device, suite, labels, show_all, db, as_json):
    """Compare run A with run B: the pairs recorded in both, environment difference first.

    A and B are run ids, 'latest', or selectors such as device=cuda,release=2.14 (the latest
    complete run matching); --device/--suite/--label apply to both sides, so
    'compare release=2.13 release=2.14 --device cuda' compares two releases on one device.
    """
    from torchport.views.compare import compare_runs
    from torchport.views.compare_tables import LIST_ROWS, comparison_views

    store = open_db(db)
    filters = run_filters(device, suite, labels)
    a, b = resolve(store, run_a, filters), resolve(store, run_b, filters)
    if as_json:
        from torchport.views.compare import ENTRY_LISTS

        with store_problems():  # each list entry's line made where its part is shaped
            data = compare_runs(store, a, b, entries=json_entry()).to_dict()
        for name in ENTRY_LISTS:
            data[name] = made_raw(data[name])
        echo_json(data, flat_from=2)  # a list's entry per line
        return
    every = show_all  # the text form shows each list's first rows: only those read
    with store_problems():
        comparison = compare_runs(store, a, b, limit=None if every else LIST_ROWS)
    from torchport.interfaces.render import make_console, print_views

    views = comparison_views(comparison, limit=None if every else LIST_ROWS)
    print_views(make_console(), {str(i): v for i, v in enumerate(views)})
