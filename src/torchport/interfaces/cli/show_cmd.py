"""torchport show RUN: a verdict block (runs? matches? on the device? wait before the first
step? how fast?), then the matrix and the placement of one run; --detail for every view; a
large run in summary (statuses and failures grouped by error signature) unless --all."""

import click

from torchport import settings
from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    public_result,
    store_problems,
)

# Past this many results the per-row views would print pages of rows: a summary instead.
# Large enough for a whole hf (392) or ops run; TORCHPORT_SHOW_SUMMARY_ABOVE overrides it.
SUMMARY_ABOVE = settings.SETTINGS["TORCHPORT_SHOW_SUMMARY_ABOVE"].default
# The views shown after the verdict without --detail (the rest are named in one line).
LEAD_VIEWS = ("summary", "matrix", "ops", "placement", "kernels", "serving")


@click.command("show")
@click.argument("run_id", required=False)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help=f"Every row even for a run of more than {SUMMARY_ABOVE} results.",
)
@click.option(
    "--csv",
    "csv_view",
    default=None,
    metavar="VIEW",
    help="Print one view as CSV (e.g. 'ops', the operator compatibility table).",
)
@click.option(
    "--detail",
    is_flag=True,
    help="Every view (perf, compile, train, profile, ...) after the verdict, not only the "
    "matrix and placement.",
)
@db_option
@json_option
def command(run_id, show_all, db, as_json, csv_view, detail):
    """Show one run (default: the latest)."""
    from torchport.views import build_views
    from torchport.views.headline import run_headline, verdict_view

    store = open_db(db)
    with store_problems():
        run = store.get_run(
            run_id or store.runs(latest=True)[0]["id"], plan=False, environments=True
        )
        environments = run.pop("environments")
        head = run_headline(store, run)
        total = store.results(run_id=run["id"], count=True)
        notes = store.notes(run_id=run["id"])
        above = settings.value("TORCHPORT_SHOW_SUMMARY_ABOVE")
        summary = total > above and not show_all and not csv_view
        if as_json or not summary:  # the plan (100 000 entries in a large sweep) when used
            run = store.get_run(run["id"])
        if summary:
            from torchport.views.run_summary import summary_views

            views = summary_views(store, run)
            results = None
        else:
            results = store.results(run_id=run["id"])
            views = build_views(run, results)
            if csv_view in OPS_VIEWS or as_json:  # 2 000+ rows: only when asked for
                views.update(_ops_extra(run, results))
    if csv_view:
        _print_csv(views, csv_view)
        return
    if as_json:
        body = {
            "run": run,
            "environment": environments[0] if environments else {},
            "environments": environments,
            "views": views,
            "notes": notes,
            "summary": summary,
            "results_total": total,
            "headline": head.to_dict(),
            "verdict": verdict_view(head, device=run.get("device")).to_dict(),
        }
        if results is not None:
            body["results"] = [public_result(r) for r in results]
        echo_json(body)
        return
    from torchport.interfaces.render import make_console, print_run_header, print_views
    from torchport.views.compare_tables import notes_view

    console = make_console()
    print_run_header(console, run, environments)
    console.print()
    if notes:
        views["notes"] = notes_view(notes)
    hidden = []
    if not (detail or summary):
        # a view that failed is always shown: its note names the error
        hidden = [n for n, v in views.items() if n not in LEAD_VIEWS + ("notes",) and v.columns]
        views = {n: v for n, v in views.items() if n not in hidden}
    print_views(console, {"verdict": verdict_view(head, device=run.get("device")), **views})
    if hidden:
        console.print(f"more with --detail: {', '.join(hidden)}", markup=False, highlight=False)
    if summary:
        console.print(
            f"{total} results: a summary; --all for every row, or 'torchport "
            f"results --run {run['id']}' a page at a time",
            markup=False,
            highlight=False,
        )


OPS_VIEWS = ("ops-coverage", "ops-not-run")


def _ops_extra(run: dict, results: list[dict]) -> dict:
    """An ops run's coverage (every backend-relevant overload's state, when the run has an
    audit) and what it did not run, by kind."""
    from torchport.views import op_coverage, ops_not_run
    from torchport.views.ops import is_op_result

    extra = {}
    cov = op_coverage.coverage(run, results)
    if cov is not None:
        extra["ops-coverage"] = op_coverage.view(cov)
    ops = [r for r in results if is_op_result(r)]
    if ops:
        extra["ops-not-run"] = ops_not_run.view(ops_not_run.not_run(ops))
    return extra


def _print_csv(views: dict, name: str) -> None:
    import csv
    import sys

    from torchport.interfaces.cli import UsageProblem

    if name not in views:
        raise UsageProblem(
            f"--csv {name}: this run has no view '{name}'; it has {', '.join(views) or 'none'}"
        )
    from torchport.interfaces.formats import cell

    view = views[name]
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(view.names)
    for row in view.rows:  # numbers as numbers; composite values as the table shows them
        writer.writerow(
            [
                v if isinstance(v, (int, float, str)) or v is None else cell(v, c.kind)
                for v, c in zip(row, view.columns, strict=True)
            ]
        )
