"""torchport run: evaluate a device on a suite and record every result."""

from __future__ import annotations

from typing import Any

import click

from torchport.interfaces.cli import UsageProblem
from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    problems,
    public_result,
    split_csv,
)


def _labels(values) -> dict:
    labels = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise UsageProblem(f"--label '{value}' must look like key=value")
        labels[key] = val
    return labels


def _shapes(value: str | None) -> dict:
    """'seq=64,128 batch=1,2' or 'seq=64,128;batch=2' -> {'seq': [64, 128], 'batch': [1, 2]}."""
    shapes: dict[str, Any] = {}
    for part in (value or "").replace(";", " ").split():
        key, sep, nums = part.partition("=")
        try:
            shapes[key] = [int(n) for n in nums.split(",") if n]
        except ValueError:
            shapes[key] = None
        if not sep or key not in ("seq", "batch") or not shapes[key] or min(shapes[key]) <= 0:
            raise UsageProblem(f"--shapes '{value}' must look like seq=64,128 or batch=1,2")
    return shapes


def _integers(flag: str, value: str | None) -> tuple[int, ...]:
    """'8,16' -> (8, 16); RunConfig checks they are positive."""
    try:
        return tuple(int(v) for v in (value or "").split(",") if v.strip())
    except ValueError:
        raise UsageProblem(
            f"{flag} '{value}' must be integers, comma-separated (e.g. 8,16)"
        ) from None


class ProbesOption(click.Option):
    """``--probes``: its help names the registered probes (entry points) and the defaults
    from api, read only when help is shown, so a run does not scan for them."""

    def get_help_record(self, ctx):
        from torchport.api import DEFAULT_PROBES, GENERATE_PROBES
        from torchport.probes.registry import probe_names

        self.help = (
            f"Probes besides the ladder, comma-separated: {', '.join(probe_names())} "
            f"(default: {', '.join(p for p in DEFAULT_PROBES if p != 'placement')}, and "
            "placement off the CPU; "
            f"--scenario generate: {', '.join(GENERATE_PROBES)}); 'none' for the ladder alone."
        )
        return super().get_help_record(ctx)


_CLICK_TYPES = {"int": int, "float": float}


def _flag(f) -> str:
    """The option's name: its ``flag``, else ``--`` and the field's name with dashes."""
    return f.metadata["cli"]["flag"] or "--" + f.name.replace("_", "-")


def _option_kwargs(f) -> tuple[list[str], dict[str, Any]]:
    """The click option declared by RunConfig field ``f``'s metadata (``config.option``)."""
    import dataclasses

    meta = f.metadata["cli"]
    kwargs: dict[str, Any] = {"help": meta["help"]}
    declared = (
        meta["cli_default"]
        if meta["cli_default"] is not dataclasses.MISSING
        else (f.default if f.default is not dataclasses.MISSING else None)
    )
    annotation = str(f.type).replace(" | None", "")
    if meta["parse"] == "globs":
        kwargs["multiple"] = True
    elif annotation == "bool":
        kwargs["is_flag"] = True
    else:
        kwargs["default"] = declared
        if meta["parse"] is None and annotation in _CLICK_TYPES:
            kwargs["type"] = _CLICK_TYPES[annotation]
    if meta["choices"]:
        kwargs["type"] = click.Choice(list(meta["choices"]))
    if meta["show_default"]:
        kwargs["show_default"] = True
    if meta["metavar"]:
        kwargs["metavar"] = meta["metavar"]
    if meta["cls"]:
        kwargs["cls"] = globals()[meta["cls"]]
    return [_flag(f), f.name], kwargs


def config_fields() -> list:
    """RunConfig's fields that are ``torchport run`` options: its sections' (what to run, how
    to measure, where to execute), in their declared order."""
    import dataclasses

    from torchport.config import SECTIONS

    return [
        f
        for section in SECTIONS.values()
        for f in dataclasses.fields(section)
        if "cli" in f.metadata
    ]


def config_options(command):
    """Decorate ``command`` with one click option per RunConfig option field."""
    for f in reversed(config_fields()):
        decls, kwargs = _option_kwargs(f)
        command = click.option(*decls, **kwargs)(command)
    return command


def config_from_options(api, options: dict[str, Any]):
    """The RunConfig the options ask for: each option's text parsed as its field says."""
    from torchport.config import RunConfig
    from torchport.devices import best_available

    values: dict[str, Any] = {}
    for f in config_fields():
        value = options[f.name]
        parse = f.metadata["cli"]["parse"]
        if parse == "globs":
            value = split_csv(value)
        elif parse == "csv":
            value = split_csv([value])
        elif parse == "ints":
            value = _integers(_flag(f), value)
        elif parse == "shapes":
            value = _shapes(value)
        values[f.name] = value
    # What the CLI resolves: the best device, the suite a workload runs in, the probes.
    values["device"] = options["device"] or best_available()
    values["suite"] = "workload" if options["workload"] else (options["suite"] or "smoke")
    values["probes"] = api.resolve_probes(
        values["device"],
        options["probes"],
        train_steps=options["train_steps"],
        profile=options["profile"],
        shapes=bool(options["shapes"]),
        scenario=options["scenario"],
    )
    return RunConfig(**values)


@click.command("run")
@config_options
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE")
@click.option(
    "--resume",
    "resume",
    default=None,
    metavar="RUN_ID",
    help="Finish an interrupted run: only what is missing runs.",
)
@db_option
@json_option
def command(labels, resume, db, as_json, **options):
    """Run a suite (or your workload) on a device and record the evidence."""
    from torchport import api

    with problems():
        # A new run's options are read here; api.run checks them, expands the plan or
        # resumes, and only then opens the knowledge base for writing (made, if new).
        config = None if resume else config_from_options(api, options)
        label_map = {} if resume else _labels(labels)
        opened: list = []

        def open_store():
            opened.append(open_db(db, write=True))
            return opened[0]

        outcome = _run_with_progress(api, open_store, config, resume, label_map, quiet=as_json)
    _report(opened[0], outcome, as_json)


def _run_with_progress(api, store, config, resume, labels, *, quiet: bool):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from torchport.interfaces.render import make_console

    console = make_console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )
    bar = progress.add_task("run", total=None)

    def on_plan(tasks):
        # Shown from here on: a config that api.run refuses prints its one line, no bar.
        progress.start()
        progress.update(bar, total=len(tasks))

    def on_start(task):
        progress.update(bar, description=f"{task.case} [{task.mode}]")

    def on_result(result):
        progress.advance(bar)
        if not quiet:
            progress.console.print(
                f"  {result.case:<28} {result.mode:<8} {result.status}",
                markup=False,
                highlight=False,
            )

    try:
        return api.run(
            config,
            store,
            resume=resume,
            labels=labels,
            on_plan=on_plan,
            on_start=on_start,
            on_result=on_result,
        )
    finally:
        progress.stop()


def _report(store, outcome, as_json) -> None:
    from torchport.interfaces.render import make_console, print_views
    from torchport.views import build_views

    run = store.get_run(outcome.run_id)
    results = store.results(run_id=outcome.run_id)
    views = build_views(run, results)
    if as_json:
        echo_json(
            {
                "run_id": outcome.run_id,
                "state": outcome.state,
                "views": views,
                "results": [public_result(r) for r in results],
            }
        )
    else:
        console = make_console()
        print_views(console, views)
        console.print(
            f"run {outcome.run_id}: {outcome.state}; 'torchport show {outcome.run_id}' for details",
            markup=False,
            highlight=False,
        )
    if outcome.broken:
        raise click.ClickException(
            f"the workers for device '{run['device']}' cannot start: "
            f"{outcome.broken}; results so far are kept (resume with "
            f"--resume {outcome.run_id})"
        )
    if outcome.state == "interrupted":
        # The shell's convention: 128 + the signal (130 for SIGINT, 143 for SIGTERM).
        raise SystemExit(128 + (outcome.signal or 2))
