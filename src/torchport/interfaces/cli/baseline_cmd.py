"""torchport baseline save RUN -o expected.json: what a run is expected to produce."""

import click

from torchport.interfaces.cli.common import (
    bulk_read,
    db_option,
    open_db,
    resolve,
    run_filters,
    selector_options,
    store_problems,
)


@click.group("baseline")
def command():
    """Expected results for 'torchport gate' (CI)."""


@command.command("save")
@click.argument("run_spec", metavar="RUN", required=False)
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    metavar="FILE",
    help="The expected file to write (JSON).",
)
@click.option("--no-perf", is_flag=True, help="Statuses only, no step-time floors.")
@click.option(
    "--perf-tolerance",
    type=float,
    default=None,
    metavar="FRACTION",
    help="Fixed step-time tolerance (0.1 = 10%); default: the measured noise.",
)
@selector_options
@db_option
@bulk_read
def save(run_spec, output, no_perf, perf_tolerance, device, suite, labels, db):
    """Save RUN's statuses (and step times with their spread) as the expected file.

    RUN is a run id, 'latest' or a selector (device=cpu,release=a); default the latest run.
    """
    from torchport.interfaces.cli import UsageProblem
    from torchport.interfaces.json_text import Raw, iter_json
    from torchport.views.baseline import baseline_texts

    if perf_tolerance is not None and not 0 <= perf_tolerance <= 10:  # nan is neither
        raise UsageProblem("--perf-tolerance must be a fraction from 0 to 10 (0.1 for 10%)")
    store = open_db(db)
    run_id = resolve(store, run_spec, run_filters(device, suite, labels))
    with store_problems():
        run = store.get_run(run_id, plan=False)  # the plan (100 000 entries) is not kept
        # statuses and step times only, plain rows, in parts on a machine with cores to spare
        head, texts, perf = baseline_texts(
            store, run, perf=not no_perf, perf_tolerance=perf_tolerance
        )
    from torchport.interfaces.output import OutputError, output_file

    try:
        with output_file(output) as f:
            # One entry a line, each written as json.dumps writes it (views/baseline.py
            # entry_text: json.dump with an indent is pure Python, and slower).
            entries = {key: Raw(text) for key, text in texts}
            f.writelines(iter_json({**head, "entries": entries}, indent=1, flat_from=2))
            f.write("\n")
    except OutputError as exc:
        raise UsageProblem(str(exc)) from None
    click.echo(
        f"baseline of run {run_id}: {len(texts)} (case, mode) entries, "
        f"{perf} with a step time, written to {output}"
    )
