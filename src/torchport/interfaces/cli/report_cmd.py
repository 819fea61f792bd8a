"""torchport report RUN [--compare OTHER] -o FILE: the run's pages in one file to attach to a
decision (self-contained HTML, or a Markdown summary)."""

import click

from torchport.interfaces.cli.common import (
    db_option,
    open_db,
    resolve,
    run_filters,
    selector_options,
    store_problems,
)


@click.command("report")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--compare", "other", default=None, metavar="OTHER", help="Add RUN compared to OTHER."
)
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False), help="File to write."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default=None,
    help="html (one self-contained file) or md; default from the file name, else html.",
)
@selector_options
@db_option
def command(run_id, other, output, fmt, device, suite, labels, db):
    """Write RUN's page (and with --compare, OTHER -> RUN) to one file that opens from disk
    and fetches nothing. RUN and OTHER are run ids, 'latest' or selectors."""
    from torchport.interfaces.cli.serve_cmd import need_web_extra

    need_web_extra()
    from torchport.interfaces.web.report import html_report, markdown_report, report_pages

    store = open_db(db)
    filters = run_filters(device, suite, labels)
    run = resolve(store, run_id, filters)
    against = resolve(store, other, filters) if other else None
    with store_problems():
        pages = report_pages(store, run, against)
    fmt = fmt or ("md" if output.endswith(".md") else "html")
    text = markdown_report(pages) if fmt == "md" else html_report(pages)
    from torchport.interfaces.output import OutputError, output_file

    try:
        with output_file(output) as f:
            f.write(text)
    except OutputError as exc:
        from torchport.interfaces.cli import UsageProblem

        raise UsageProblem(str(exc)) from None
    compared = f" compared to {against}" if against else ""
    size_kib = len(text.encode()) / 1024
    click.echo(f"report of run {run}{compared}: {output} ({size_kib:.0f} KiB, {fmt})")
