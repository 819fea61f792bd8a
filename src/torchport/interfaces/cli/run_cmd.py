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


@click.command("run")
@click.option("--suite", default=None, help="Suite to run (default smoke; 'torchport suites').")
@click.option("--cases", "cases", multiple=True, help="Case id globs, comma-separated.")
@click.option("--exclude", multiple=True, help="Case id globs to leave out.")
@click.option(
    "--workload",
    default=None,
    metavar="MODULE:FACTORY",
    help="Run your own model: a factory returning dict(model=, inputs=, ...).",
)
@click.option("--modes", default="eager,compile", show_default=True)
@click.option("--device", default=None, help="cpu, cuda, xpu, mps, simdev... (default: best).")
@click.option("--dtype", default="float32", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--timeout",
    "timeout_s",
    default=600.0,
    show_default=True,
    type=float,
    help="Hard per-case deadline in seconds.",
)
@click.option(
    "--compile-timeout",
    "compile_timeout_s",
    default=None,
    type=float,
    help="Limit on one compilation, in seconds (status compile_timeout).",
)
@click.option("--compile-backend", default=None, help="torch.compile backend (default: device's).")
@click.option(
    "--compile-mode",
    default="default",
    show_default=True,
    help="torch.compile mode for every compiled step: default, reduce-overhead, "
    "max-autotune, max-autotune-no-cudagraphs.",
)
@click.option(
    "--scenario",
    default="train",
    show_default=True,
    help="train (a forward+backward step) or generate (causal LMs: prefill, then greedy "
    "decode with a KV cache; TTFT, TPOT, tokens/s, token parity).",
)
@click.option(
    "--prompt-lengths",
    default="8,16",
    show_default=True,
    help="generate: prompt lengths prefilled, comma-separated.",
)
@click.option(
    "--new-tokens", default=8, show_default=True, type=int, help="generate: tokens per prompt."
)
@click.option(
    "--gen-batches",
    default=None,
    help="generate: batch sizes to measure, comma-separated (default 1,8 on the host, "
    "1,8,64 on an accelerator, a batch past 8 kept only if it fits).",
)
@click.option("--probes", default=None, cls=ProbesOption)
@click.option("--strict", is_flag=True, help="Turn host fallback into errors where possible.")
@click.option("--batch", default=None, type=int)
@click.option("--seq", default=None, type=int)
@click.option("--shapes", default=None, help="Recompile study, e.g. seq=64,128,256.")
@click.option("--train-steps", default=0, type=int, help="Training-loss parity over N steps.")
@click.option("--profile", is_flag=True, help="Keep a torch.profiler trace per result.")
@click.option("--peak-tflops", default=None, type=float, help="Device peak for MFU.")
@click.option(
    "--peak-gbps",
    default=None,
    type=float,
    help="Device memory bandwidth, GB/s, for the hot-spot roofline (--probes hotspots).",
)
@click.option(
    "--perf-budget",
    "perf_budget_s",
    default=2.0,
    show_default=True,
    type=float,
    help="Seconds of timed steps per side (eager/compiled) in the perf probe.",
)
@click.option(
    "--jobs",
    "jobs",
    default=1,
    show_default=True,
    type=int,
    help="Workers at once: each owns one device index (on the CPU, an equal share of the cores).",
)
@click.option(
    "--executor",
    "executor_name",
    default="local",
    show_default=True,
    type=click.Choice(["local", "ray"]),
    help="Where tasks run: this host, or a Ray cluster (pip install 'torchport[ray]').",
)
@click.option(
    "--ray-address",
    default=None,
    metavar="auto|HOST:PORT",
    help="The Ray cluster to join (default: start one on this host for the run).",
)
@click.option(
    "--ray-retries",
    default=1,
    show_default=True,
    type=int,
    help="Times a task whose Ray worker or node was lost is run again.",
)
@click.option(
    "--world-size",
    default=2,
    show_default=True,
    type=int,
    help="dist cases: ranks in the world (over all nodes).",
)
@click.option(
    "--dist-backend",
    default=None,
    metavar="NAME",
    help="dist cases: the collective backend (default: the device's own: gloo, nccl, xccl...).",
)
@click.option(
    "--nnodes",
    default=1,
    show_default=True,
    type=int,
    help="dist cases: nodes, through torchrun's rendezvous (all on this host without "
    "--rdzv-endpoint).",
)
@click.option(
    "--rdzv-endpoint",
    default=None,
    metavar="HOST:PORT",
    help="dist cases: torchrun's c10d rendezvous to join; run the same command on every node.",
)
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
def command(
    suite,
    cases,
    exclude,
    workload,
    modes,
    device,
    dtype,
    seed,
    timeout_s,
    compile_timeout_s,
    compile_backend,
    compile_mode,
    scenario,
    prompt_lengths,
    new_tokens,
    gen_batches,
    probes,
    strict,
    batch,
    seq,
    shapes,
    train_steps,
    profile,
    peak_tflops,
    peak_gbps,
    perf_budget_s,
    jobs,
    executor_name,
    ray_address,
    ray_retries,
    world_size,
    dist_backend,
    nnodes,
    rdzv_endpoint,
    labels,
    resume,
    db,
    as_json,
):
    """Run a suite (or your workload) on a device and record the evidence."""
    from torchport import api
    from torchport.config import RunConfig

    with problems():
        if resume:
            config = None
        else:
            from torchport.devices import best_available

            device = device or best_available()
            config = RunConfig(
                suite="workload" if workload else (suite or "smoke"),
                workload=workload,
                cases=split_csv(cases),
                exclude=split_csv(exclude),
                modes=split_csv([modes]),
                device=device,
                dtype=dtype,
                seed=seed,
                timeout_s=timeout_s,
                compile_timeout_s=compile_timeout_s,
                compile_backend=compile_backend,
                compile_mode=compile_mode,
                scenario=scenario,
                prompt_lengths=_integers("--prompt-lengths", prompt_lengths),
                new_tokens=new_tokens,
                gen_batches=_integers("--gen-batches", gen_batches),
                probes=api.resolve_probes(
                    device,
                    probes,
                    train_steps=train_steps,
                    profile=profile,
                    shapes=bool(shapes),
                    scenario=scenario,
                ),
                strict=strict,
                batch=batch,
                seq=seq,
                shapes=_shapes(shapes),
                train_steps=train_steps,
                profile=profile,
                peak_tflops=peak_tflops,
                peak_gbps=peak_gbps,
                perf_budget_s=perf_budget_s,
                jobs=jobs,
                executor=executor_name,
                ray_address=ray_address,
                ray_retries=ray_retries,
                world_size=world_size,
                dist_backend=dist_backend,
                nnodes=nnodes,
                rdzv_endpoint=rdzv_endpoint,
            )
            label_map = _labels(labels)
            if config.executor == "local":  # a Ray cluster's devices are checked on its nodes
                api.check_device(config.device)
            from torchport.runner.plan import expand

            expand(config)  # unknown suites and empty selections fail before anything is made
            api.check_workload(config)
        # Only now is the knowledge base opened for writing (and made, if new).
        store = open_db(db, write=True)
        if resume:
            previous = store.get_run(resume)
            api.check_resumable(previous)
            config = RunConfig.from_dict(previous["config"])
            if config.executor == "local":
                api.check_device(config.device)
            label_map = previous["labels"]
        # Workers, or a connection to the Ray cluster: a cluster without the device is bad
        # input, refused here before the run is recorded.
        assert config is not None
        executor = api.make_executor(config)
        outcome = _run_with_progress(api, store, config, resume, label_map, executor, quiet=as_json)
    _report(store, outcome, as_json)


def _run_with_progress(api, store, config, resume, labels, executor, *, quiet: bool):
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
    with Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=False,
    ) as progress:
        bar = progress.add_task("run", total=None)

        def on_plan(tasks):
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

        return api.run(
            None if resume else config,
            store,
            resume=resume,
            labels=labels,
            executor=executor,
            on_plan=on_plan,
            on_start=on_start,
            on_result=on_result,
        )


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
