"""torchport evaluate --device X [--against Y] [--budget 30m] [--workload MODULE:FN ...]: the
whole evaluation of a device in one command, and its scorecard."""

from __future__ import annotations

import os
import re

import click

from torchport.interfaces.cli import UsageProblem, one_line
from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    parse_labels,
    problems,
)

_UNIT_S = {"s": 1, "m": 60, "h": 3600}
_BUDGET = re.compile(r"(?:(\d+(?:\.\d+)?)([smh]))+")
_PIECE = re.compile(r"(\d+(?:\.\d+)?)([smh])")
MIN_BUDGET_S = 60.0
DEFAULT_BUDGET = "30m"
MAX_BUDGET_S = 7 * 24 * 3600.0


def parse_budget(text: str) -> float:
    """'30m', '90s', '1h30m' -> seconds; UsageProblem naming the form otherwise."""
    value = (text or "").strip().lower()
    if not _BUDGET.fullmatch(value):
        raise UsageProblem(
            f"--budget '{one_line(text)}' must be a duration with a unit, e.g. 30m, 90s, 1h30m"
        )
    seconds = sum(float(n) * _UNIT_S[u] for n, u in _PIECE.findall(value))
    if not MIN_BUDGET_S <= seconds <= MAX_BUDGET_S:
        raise UsageProblem(
            f"--budget '{one_line(text)}' is {seconds:.0f} s; give between 1m and 7 days (168h)"
        )
    return seconds


@click.command("evaluate")
@click.option("--device", default=None, help="The device to evaluate (default: the best).")
@click.option(
    "--against",
    default=None,
    metavar="DEVICE",
    help="The device you use now: the plan's timed parts run there too, for speed ratios "
    "(default: none; correctness is always judged against the CPU float64 reference).",
)
@click.option(
    "--budget",
    default=None,
    help="Wall time for it all: 20m, 1h (default 30m; with --resume: more time for what is "
    "left, instead of what the first budget left).",
)
@click.option(
    "--workload",
    "workloads",
    multiple=True,
    metavar="MODULE:FN",
    help="Your own model (a factory), evaluated eager and compiled with training steps; "
    "repeat for more.",
)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE")
@click.option(
    "--resume",
    default=None,
    metavar="EVALUATION",
    help="Finish an interrupted evaluation: finished parts are kept, the rest run.",
)
@click.option(
    "--scorecard",
    "only_scorecard",
    default=None,
    metavar="EVALUATION",
    help="Show an evaluation's scorecard without running anything.",
)
@click.option("--plan-only", is_flag=True, help="Print the plan and stop.")
@click.option(
    "--report",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the scorecard as one self-contained HTML file.",
)
@click.option(
    "--compat",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also write the compatibility table (one sorted line per op, diffable).",
)
@db_option
@json_option
def command(
    device, against, budget, workloads, labels, resume, only_scorecard, plan_only, report,
    compat, db, as_json,
):  # fmt: skip
    """Evaluate a device in one command: a plan across the suites sized to --budget (printed
    first, with what was left out and why), every part recorded as one labelled group of runs,
    then the scorecard: one row per question, its answer, a colour and the evidence."""
    import time

    from torchport.interfaces import evaluation as ev
    from torchport.interfaces.render import make_console

    started = time.monotonic()

    console = make_console(stderr=as_json)
    with problems():
        if only_scorecard:
            store = open_db(db)
            _finish(store, only_scorecard, console, as_json, report, compat, None)
            return
        budget_s = parse_budget(budget or DEFAULT_BUDGET)
        if resume:
            from torchport.views.evaluation import load_group

            try:  # an unknown evaluation is bad input: read-only, so no file is made for it
                load_group(open_db(db), resume)
            except LookupError as exc:
                raise UsageProblem(str(exc)) from None
            store = open_db(db, write=True)
            outcome = ev.evaluate(
                store,
                resume=resume,
                budget_s=budget_s if budget else None,
                started=started,
                workload_folder=os.getcwd(),
                on_part=_on_part(console),
                on_result=_on_result(console),
            )
        else:
            from torchport import api
            from torchport.devices import best_available

            device = device or best_available()
            if against == device:
                raise UsageProblem(
                    "--against names the device under evaluation; give the device you use "
                    "now (e.g. cpu)"
                )
            api.check_device(device)
            if against:
                api.check_device(against)
            folder = os.getcwd()
            for spec in workloads:
                api.check_workload(_workload_config(spec, device), folder)
            store = open_db(db, write=True)
            plan = ev.make_plan(
                store, device=device, against=against, budget_s=budget_s,
                workloads=list(workloads),
            )  # fmt: skip
            _print_plan(console, plan)
            if plan_only:
                if as_json:
                    echo_json({"plan": plan.to_dict()})
                return
            outcome = ev.evaluate(
                store,
                plan,
                labels=parse_labels(labels),
                started=started,
                workload_folder=folder,
                on_part=_on_part(console),
                on_result=_on_result(console),
            )
    _finish(store, outcome.evaluation, console, as_json, report, compat, outcome)


def _workload_config(spec: str, device: str):
    from torchport.config import RunConfig

    return RunConfig(suite="workload", workload=spec, device=device, probes=())


def _print_plan(console, plan) -> None:
    from torchport.interfaces.render import print_view
    from torchport.views.base import View, columns

    rows = [
        [
            p.name,
            p.side,
            p.device,
            len(p.cases),
            ",".join(p.modes),
            p.estimate_s,
            f"{p.measured} of {len(p.cases) * len(p.modes)} from the knowledge base",
            len(p.left_out),
        ]
        for p in plan.parts
    ]
    view = View(
        f"Plan of evaluation {plan.evaluation}: {plan.device}"
        + (f" against {plan.against}" if plan.against else "")
        + f", budget {plan.budget_s:.0f} s",
        columns(
            "part",
            "side",
            "device",
            ("cases", "count"),
            "modes",
            ("estimate", "s"),
            "estimated from",
            ("cases left out", "count"),
        ),  # fmt: skip
        rows,
        [f"estimate {plan.estimate_s:.0f} s of the {plan.budget_s:.0f} s budget"]
        + [f"left out: {x['part']} ({x['side']}): {x['why']}" for x in plan.left_out],
    )
    print_view(console, view)
    console.print()


def _on_part(console):
    def show(part, how):
        verb = {"done": "already recorded", "resume": "resuming", "run": "running"}[how]
        console.print(f"== {part.name} ({part.side}, {part.device}): {verb}, "
                      f"{len(part.cases)} cases, estimate {part.estimate_s:.0f} s")  # fmt: skip

    return show


def _on_result(console):
    def show(result):
        console.print(f"  {result.case:<40} {result.mode:<8} {result.status}")

    return show


def _finish(store, evaluation, console, as_json, report, compat, outcome) -> None:
    from torchport.interfaces.cli.common import store_problems
    from torchport.interfaces.evaluation_report import print_scorecard, write_compat, write_report
    from torchport.views.scorecard import scorecard

    with store_problems():
        try:
            card = scorecard(store, evaluation)
        except LookupError as exc:
            raise UsageProblem(str(exc)) from None
    from torchport.interfaces.output import OutputError

    written = []
    try:
        if report:
            written.append(write_report(card, report))
        if compat:
            written.append(write_compat(card, compat))
    except OutputError as exc:  # the evaluation is recorded: --scorecard writes it again
        raise UsageProblem(f"{exc}; 'torchport evaluate --scorecard {evaluation}' with "
                           "another path writes it") from None  # fmt: skip
    if as_json:
        body = {"scorecard": card.to_dict()}
        if outcome is not None:
            body["outcome"] = vars(outcome)
        echo_json(body)
    else:
        print_scorecard(console, card)
        for line in written:
            console.print(line)
        if outcome is not None:
            console.print(
                f"evaluation {evaluation}: {outcome.state}"
                + (f" ({outcome.stopped_by})" if outcome.stopped_by else "")
                + f" in {outcome.elapsed_s:.0f} s; 'torchport evaluate --scorecard "
                f"{evaluation}' shows it again"
                + (f", '--resume {evaluation}' finishes it" if outcome.state != "complete" else "")
            )
    if outcome is not None and outcome.stopped_by == "broken":
        raise click.ClickException(
            f"the workers of a part could not go on: {outcome.broken}; what was recorded is kept "
            f"(--resume {evaluation} finishes it)"
        )
    if outcome is not None and outcome.state == "interrupted" and outcome.stopped_by == "signal":
        raise SystemExit(128 + (outcome.signal or 2))
