"""torchport gate RUN --baseline expected.json: exit 1 on a regression (for CI)."""

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

REGRESSED_EXIT = 1


def _line(item: dict) -> str:
    """One regression or improvement; stored text (case ids) printed as text, never obeyed."""
    from torchport.interfaces.formats import safe

    where = safe(f"{item['case']} [{item['mode']}]")
    if "test" in item:
        return (
            f"{where}: {item['kind']}: {item['expected']:.3g} -> {item['got']:.3g} ms "
            f"({item['ratio']:.2f}x); {item['test']}"
        )
    expected = item["expected"] + (
        f" @{item['expected_stage']}" if item.get("expected_stage") else ""
    )
    got = (
        "nothing recorded"
        if item["got"] is None
        else item["got"] + (f" @{item['got_stage']}" if item.get("got_stage") else "")
    )
    return f"{where}: {item['kind']}: expected {safe(expected)}, got {safe(got)}"


@click.command("gate")
@click.argument("run_spec", metavar="RUN", required=False)
@click.option(
    "--baseline",
    "baseline_path",
    required=True,
    metavar="FILE",
    help="The expected file from 'torchport baseline save'.",
)
@selector_options
@db_option
@json_option
@bulk_read
def command(run_spec, baseline_path, device, suite, labels, db, as_json):
    """Hold RUN to the baseline: exit 1 on any regression; improvements are listed (update
    the expected file then). RUN as for 'compare'; default the latest run."""
    from torchport.interfaces.cli import UsageProblem
    from torchport.views.baseline import BaselineError, gate_run, load_baseline

    try:
        baseline = load_baseline(baseline_path)
    except BaselineError as exc:
        raise UsageProblem(str(exc)) from None
    store = open_db(db)
    run_id = resolve(store, run_spec, run_filters(device, suite, labels))
    with store_problems():
        run = store.get_run(run_id, plan=False)  # the plan is read only if it is needed
        # statuses and step times only, plain rows, in parts on a machine with cores to spare
        report = gate_run(
            store,
            baseline,
            run,
            plan=lambda: store.get_run(run_id)["plan"],
            entries=json_entry(2) if as_json else None,  # a finding's text made in its part
        )
    if as_json:
        data = report.to_dict()
        for name in ("regressions", "improvements", "new"):
            data[name] = made_raw(data[name])
        echo_json(data)
    else:
        click.echo(
            f"gate: run {run_id} against the baseline of run {report.baseline_run}: "
            f"{report.checked} checked, {report.unchanged} as expected, "
            f"{len(report.regressions)} regressions, {len(report.improvements)} "
            "improvements"
        )
        for title, items in (
            ("regressions", report.regressions),
            (
                "improvements (update the expected file: 'torchport baseline save')",
                report.improvements,
            ),
        ):
            if items:
                click.echo(f"{title}:")
                for item in items:
                    click.echo(f"  {_line(item)}")
        if report.new:
            click.echo(f"{len(report.new)} results not in the baseline (new cases)")
        if report.not_planned:
            click.echo(
                f"{report.not_planned} baseline entries not in this run's plan (not checked)"
            )
    if not report.ok:
        raise SystemExit(REGRESSED_EXIT)
