"""torchport run: evaluate a device on a suite and record every result."""

from __future__ import annotations

import click

from torchport.interfaces.cli import UsageProblem
from torchport.interfaces.cli.common import (
    db_option, echo_json, json_option, open_db, problems, public_result, split_csv,
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
    shapes = {}
    for part in (value or "").replace(";", " ").split():
        key, sep, nums = part.partition("=")
        try:
            shapes[key] = [int(n) for n in nums.split(",") if n]
        except ValueError:
            shapes[key] = None
        if not sep or key not in ("seq", "batch") or not shapes[key] or min(shapes[key]) <= 0:
            raise UsageProblem(f"--shapes '{value}' must look like seq=64,128 or batch=1,2")
    return shapes


def _check_device(name: str) -> None:
    from torchport.devices import get_adapter
    with problems():
        adapter = get_adapter(name)
    ok, reason = adapter.availability()
    if not ok:
        raise UsageProblem(f"device '{name}' is not usable here: {reason} "
                           "('torchport doctor' lists the usable devices)")


def _check_workload(path: str) -> None:
    """Import and call the factory once, so a broken workload is bad input, not a result."""
    import torch
    from torchport.cases.workload import load_factory, to_workload
    with problems():
        factory = load_factory(path)
        torch.manual_seed(0)
        try:
            value = factory()
        except Exception as exc:
            raise UsageProblem(f"--workload {path}: the factory raised {type(exc).__name__}: "
                               f"{exc}") from None
        to_workload(value, path)


@click.command("run")
@click.option("--suite", default=None, help="Suite to run (default smoke; 'torchport suites').")
@click.option("--cases", "cases", multiple=True, help="Case id globs, comma-separated.")
@click.option("--exclude", multiple=True, help="Case id globs to leave out.")
@click.option("--workload", default=None, metavar="MODULE:FACTORY",
              help="Run your own model: a factory returning dict(model=, inputs=, ...).")
@click.option("--modes", default="eager,compile", show_default=True)
@click.option("--device", default=None, help="cpu, cuda, xpu, mps, simdev... (default: best).")
@click.option("--dtype", default="float32", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=float,
              help="Hard per-case deadline in seconds.")
@click.option("--compile-timeout", "compile_timeout_s", default=None, type=float,
              help="Limit on one compilation, in seconds (status compile_timeout).")
@click.option("--compile-backend", default=None, help="torch.compile backend (default: device's).")
@click.option("--probes", default=None,
              help="Probes besides the ladder, comma-separated: placement, perf, compile, "
                   "train, profile, flex (default: placement off-CPU, perf, flex for "
                   "FlexAttention cases); 'none' for the ladder alone.")
@click.option("--strict", is_flag=True, help="Turn host fallback into errors where possible.")
@click.option("--batch", default=None, type=int)
@click.option("--seq", default=None, type=int)
@click.option("--shapes", default=None, help="Recompile study, e.g. seq=64,128,256.")
@click.option("--train-steps", default=0, type=int, help="Training-loss parity over N steps.")
@click.option("--profile", is_flag=True, help="Keep a torch.profiler trace per result.")
@click.option("--peak-tflops", default=None, type=float, help="Device peak for MFU.")
@click.option("--perf-budget", "perf_budget_s", default=2.0, show_default=True, type=float,
              help="Seconds of timed steps per side (eager/compiled) in the perf probe.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE")
@click.option("--resume", "resume", default=None, metavar="RUN_ID",
              help="Finish an interrupted run: only what is missing runs.")
@db_option
@json_option
def command(suite, cases, exclude, workload, modes, device, dtype, seed, timeout_s,
            compile_timeout_s, compile_backend, probes, strict, batch, seq, shapes, train_steps,
            profile, peak_tflops, perf_budget_s, labels, resume, db, as_json):
    """Run a suite (or your workload) on a device and record the evidence."""
    from torchport.runner.config import RunConfig
    from torchport.runner.sweep import command_line, expand, new_run_id

    store = open_db(db, create=True)
    if resume:
        with problems():
            run = store.get_run(resume)
            config = RunConfig.from_dict(run["config"])
        if run["state"] == "complete":
            raise UsageProblem(f"run {resume} is already complete; nothing to resume")
        run_id, label_map = resume, run["labels"]
        _check_device(config.device)
    else:
        from torchport.devices import best_available
        from torchport.probes.registry import default_probes
        device = device or best_available()
        _check_device(device)
        if workload:
            _check_workload(workload)
        chosen = (default_probes(device) if probes is None else
                  () if probes.strip() == "none" else split_csv([probes]))
        # Flags that ask for a measurement add its probe.
        chosen = tuple(chosen) + tuple(p for p, wanted in (("train", train_steps > 0),
                                                           ("profile", profile),
                                                           ("compile", bool(shapes)))
                                       if wanted and p not in chosen)
        with problems():
            from torchport.probes.registry import load_probe
            for name in chosen:
                load_probe(name)
            config = RunConfig(
                suite="workload" if workload else (suite or "smoke"), workload=workload,
                cases=split_csv(cases), exclude=split_csv(exclude), modes=split_csv([modes]),
                device=device, dtype=dtype, seed=seed, timeout_s=timeout_s,
                compile_timeout_s=compile_timeout_s, compile_backend=compile_backend,
                probes=chosen, strict=strict, batch=batch, seq=seq, shapes=_shapes(shapes),
                train_steps=train_steps, profile=profile, peak_tflops=peak_tflops,
                perf_budget_s=perf_budget_s)
        run_id, label_map = new_run_id(), _labels(labels)
    with problems():
        items = expand(config)
    if resume:
        store.reopen_run(run_id)
    else:
        store.create_run(run_id=run_id, command=command_line(), suite=config.suite,
                         device=config.device, config=config.to_dict(),
                         plan=[[i.case, i.mode] for i in items], labels=label_map)
    state = _execute_with_progress(store, run_id, config, items, quiet=as_json)
    _report(store, run_id, state, as_json)


def _execute_with_progress(store, run_id, config, items, *, quiet: bool) -> str:
    from torchport.interfaces.render import make_console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    from torchport.runner.pool import WorkerStartError
    from torchport.runner.sweep import execute
    done = store.done_items(run_id)
    remaining = [i for i in items if (i.case, i.mode) not in done]
    console = make_console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                  console=console, disable=quiet, transient=False) as progress:
        task = progress.add_task(f"run {run_id}", total=len(remaining))

        def on_start(item):
            progress.update(task, description=f"{item.case} [{item.mode}]")

        def on_result(result):
            progress.advance(task)
            if not quiet:
                progress.console.print(f"  {result['case']:<28} {result['mode']:<8} "
                                       f"{result['status']}")
        try:
            return execute(store, run_id, config, items, on_result=on_result,
                           on_start=on_start)
        except WorkerStartError as exc:
            store.finish_run(run_id, "interrupted")
            raise click.ClickException(f"the worker for device '{config.device}' cannot start: "
                                       f"{exc}; results so far are kept (resume with "
                                       f"--resume {run_id})") from None


def _report(store, run_id, state, as_json) -> None:
    from torchport.interfaces.render import make_console, print_views
    from torchport.interfaces.views import build_views
    run = store.get_run(run_id)
    results = store.results(run_id=run_id)
    views = build_views(run, results)
    if as_json:
        echo_json({"run_id": run_id, "state": state, "views": views,
                   "results": [public_result(r) for r in results]})
    else:
        console = make_console()
        print_views(console, views)
        console.print(f"run {run_id}: {state}; 'torchport show {run_id}' for details")
    if state == "interrupted":
        raise SystemExit(130)
