"""The library entry point: a run, from a config to recorded results.

    from torchport import api
    from torchport.config import RunConfig
    from torchport.kb import open_store

    store = open_store("kb.db", write=True)
    outcome = api.run(RunConfig(suite="smoke", device="cpu", probes=()), store)
    print(outcome.run_id, outcome.state, outcome.counts)

``run`` owns plan expansion, probe resolution, resume, the executor's life and the single store
writer: results are validated and committed one by one as they finish, so a killed run loses
nothing finished. The CLI, the web layer and scripts all call it; none of them re-implements it.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from torchport.config import ConfigError, RunConfig
from torchport.records.result import MalformedResult, Result, crashed, error_note
from torchport.runner.executors.protocol import Deadline, Executor, ExecutorBroken, Finished
from torchport.runner.plan import Task, expand, worker_env

if TYPE_CHECKING:
    from torchport.devices.base import DeviceAdapter

# What a plain run measures besides the ladder: placement where the device is not the host
# (the point of evaluating a backend) and a short perf pass. Compile economics (cold and warm
# compiles in fresh processes) costs minutes per sweep on a small host, so it runs when asked
# for: ``--probes compile``, or ``--shapes`` (the recompile study is part of it).
DEFAULT_PROBES = ("placement", "perf", "flex")
# Scenario generate: placement (of one decode step) and the serving figures.
GENERATE_PROBES = ("placement", "serve")


class RunRefused(ConfigError):
    """A run that must not start (e.g. resuming a run that is still going)."""


@dataclass
class RunOutcome:
    run_id: str
    state: str  # complete | interrupted
    counts: dict[str, int] = field(default_factory=dict)
    signal: int | None = None  # the signal that interrupted it, if one did
    broken: str | None = None  # why the executor could not go on, if it could not


def resolve_probes(
    device: str,
    requested: str | tuple[str, ...] | None,
    *,
    train_steps: int = 0,
    profile: bool = False,
    shapes: bool = False,
    scenario: str = "train",
) -> tuple[str, ...]:
    """The probes a run uses: the defaults for the device and scenario (None), none ("none"),
    or the names given; flags that ask for a measurement add its probe. Unknown names raise
    UnknownProbe; a probe that does not measure the scenario's steps, ConfigError."""
    from torchport.config import SCENARIOS
    from torchport.probes.registry import load_probe, probe_names

    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown scenario '{scenario}'; choose from {', '.join(SCENARIOS)}")
    defaults = GENERATE_PROBES if scenario == "generate" else DEFAULT_PROBES
    if requested is None:
        chosen = [p for p in defaults if p in probe_names()]
        if device.split(":")[0] == "cpu" and "placement" in chosen:
            chosen.remove("placement")
    elif requested == "none":
        chosen = []
    else:
        names = requested.split(",") if isinstance(requested, str) else list(requested)
        chosen = [n.strip() for n in names if n.strip()]
    for name, wanted in (("train", train_steps > 0), ("profile", profile), ("compile", shapes)):
        if wanted and name not in chosen:
            chosen.append(name)
    for name in chosen:
        probe = load_probe(name)  # an unknown name is bad input, before anything is recorded
        if scenario not in probe.scenarios:
            raise ConfigError(
                f"probe '{name}' measures {' and '.join(probe.scenarios)} steps, not "
                f"--scenario {scenario}; drop it from --probes"
            )
    return tuple(chosen)


def check_reference_cache() -> None:
    """Raise ConfigError unless the float64 reference cache is a folder torchport can use:
    a cache that cannot be written is the tool's problem, never a case's ``build_fail``."""
    from torchport.execution.reference import cache_dir
    from torchport.settings import SettingError

    try:
        folder = cache_dir()
    except (OSError, SettingError) as exc:
        raise ConfigError(f"the float64 reference cache cannot be used: {exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(
            f"the float64 reference cache {folder} is not writable; set "
            "TORCHPORT_REFERENCE_CACHE to a folder torchport may write"
        )


def check_device(name: str, adapter: DeviceAdapter | None = None) -> DeviceAdapter:
    """Raise ConfigError unless ``name`` (e.g. cuda:1) is usable here; else its adapter
    (``adapter``, when the caller has resolved it already, is checked instead of a new one)."""
    from torchport.devices import get_adapter

    if adapter is None:
        adapter = get_adapter(name)
    ok, reason = adapter.availability()
    if ok:
        ok, reason = adapter.index_available()
    if not ok:
        raise ConfigError(
            f"device '{name}' is not usable here: {reason} "
            "('torchport doctor' lists the usable devices)"
        )
    return adapter


# The most ranks a world of host processes gets (a device whose work runs on the host CPUs):
# more than the host has cores only measures the scheduler.
MAX_HOST_WORLD = 4


def dist_world_size(name: str) -> tuple[int, str]:
    """The largest world the ``dist`` suite can run on device ``name`` here, and why: one rank
    per visible device for an accelerator (two ranks on one device: most collective backends,
    NCCL among them, refuse it), one per host CPU (from 2, at most ``MAX_HOST_WORLD``) where
    the ranks are processes on the host (the CPU, a host-backed device)."""
    import os

    from torchport.devices import get_adapter

    adapter = get_adapter(name)
    if adapter.torch_type == "cpu" or adapter.host_backed:
        cpus = os.cpu_count() or 1
        world = max(2, min(cpus, MAX_HOST_WORLD))
        return world, f"ranks are processes on this host's {cpus} CPUs (at most {MAX_HOST_WORLD})"
    try:
        count = int(adapter.device_info().get("device_count") or 0)
    except Exception as exc:  # the count is the adapter's to give; a world of 1 is still a world
        return 1, f"{adapter.name} did not say how many devices it has ({type(exc).__name__})"
    if count >= 2:
        return count, f"one rank per {adapter.name} device ({count} visible)"
    return 1, f"{count} {adapter.name} device visible: one rank (two cannot share one device)"


def check_workload(config: RunConfig, folder: str | None = None) -> None:
    """Import and call the factory once, in a child with a deadline: bad input, not a result."""
    from torchport.runner.check_workload import check

    if config.workload is None:
        return
    problem = check(
        config.workload, batch=config.batch, seq=config.seq, folder=folder or os.getcwd()
    )
    if problem:
        raise ConfigError(problem)


def new_run_id() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def command_line() -> str:
    """This command's line, each URL in it without its password (a password may hold any
    byte, a space included, so each argument is redacted whole before they are joined)."""
    from torchport.kb.sql_common import redact_url

    args = [redact_url(a) if "://" in a else a for a in sys.argv[1:]]
    return " ".join([os.path.basename(sys.argv[0]), *args])


def local_executor(
    config: RunConfig, adapter: DeviceAdapter, *, workload_folder: str | None = None
) -> Executor:
    """One worker at a time on this host, with ``adapter``'s environment and caches."""
    from torchport.runner.executors.local import LocalExecutor

    folder = (workload_folder or os.getcwd()) if config.workload else None
    return LocalExecutor(
        device=config.device,
        env=worker_env(config, adapter, folder),
        config=config.to_dict(),
        deadline=Deadline(case_s=config.timeout_s, compile_s=config.compile_timeout_s),
        cache_dirs=adapter.cache_dirs,
    )


def parallel_executor(
    config: RunConfig, adapter: DeviceAdapter, *, workload_folder: str | None = None
) -> Executor:
    """``config.jobs`` workers on this host, each with its share (``runner.executors.shares``)."""
    from torchport.runner.executors.parallel import ParallelExecutor
    from torchport.runner.executors.shares import worker_device, worker_shares

    folder = (workload_folder or os.getcwd()) if config.workload else None
    env = worker_env(config, adapter, folder)
    shares = worker_shares(adapter, config.jobs, env)
    return ParallelExecutor(
        shares=shares,
        devices=[worker_device(config.device, adapter, s) for s in shares],
        env=env,
        config=config.to_dict(),
        deadline=Deadline(case_s=config.timeout_s, compile_s=config.compile_timeout_s),
        cache_dirs=adapter.cache_dirs,
    )


def make_executor(
    config: RunConfig,
    *,
    adapter: DeviceAdapter | None = None,
    workload_folder: str | None = None,
) -> Executor:
    """The executor ``config`` asks for: Ray, ``jobs`` local workers, or the serial one, each
    given ``adapter`` (the run's device adapter, resolved here when the caller has none).
    Raises ConfigError when it cannot be had (no such devices, no Ray, no node with them)."""
    from torchport.devices import get_adapter

    if adapter is None:
        adapter = get_adapter(config.device)
    if config.executor == "ray":
        from torchport.runner.executors.ray_executor import RayExecutor

        return RayExecutor.connect(config, adapter=adapter, workload_folder=workload_folder)
    if config.jobs > 1:
        return parallel_executor(config, adapter, workload_folder=workload_folder)
    return local_executor(config, adapter, workload_folder=workload_folder)


def check_resumable(run: dict) -> None:
    """Raise RunRefused unless ``run`` can be resumed (not complete, not still going)."""
    if run["state"] == "complete":
        raise RunRefused(f"run {run['id']} is already complete; nothing to resume")
    if run["state"] == "running":
        where = (
            f"pid {run.get('pid')} on {run.get('host')}"
            if run.get("pid")
            else f"host {run.get('host')}"
        )
        raise RunRefused(
            f"run {run['id']} is still going ({where}); wait for it to end, or "
            "stop that process, before --resume"
        )


def checked(finished: Finished) -> Result:
    """The result as a validated value that answers its task; else a recorded crash."""
    task = finished.task
    try:
        if finished.result is None:
            raise MalformedResult("the worker sent an empty result")
        result = Result.from_dict(finished.result)
        if (result.case, result.mode) != task.key:
            raise MalformedResult(
                f"result for {result.case} [{result.mode}] does not answer "
                f"the task {task.case} [{task.mode}]"
            )
    except MalformedResult as exc:
        bad = crashed(
            task.case,
            task.mode,
            case_version=task.case_version,
            stage="record",
            error=error_note("MalformedResult", str(exc)),
        )
        bad.findings["tags"] = list(task.tags)
        return bad
    result.case_version = task.case_version
    return result


class _Interrupted(Exception):
    def __init__(self, signum: int):
        self.signum = signum


def _raise_interrupted(signum, frame):
    raise _Interrupted(signum)


def run(
    config: RunConfig | None,
    store,
    *,
    resume: str | None = None,
    labels: dict[str, str] | None = None,
    command: str | None = None,
    executor: Executor | None = None,
    workload_folder: str | None = None,
    on_result: Callable[[Result], None] = lambda r: None,
    on_start: Callable[[Task], None] = lambda t: None,
    on_plan: Callable[[list[Task]], None] = lambda ts: None,
) -> RunOutcome:
    """Run ``config`` (or finish run ``resume``) and record every result in ``store``.

    This is the one place a run's plan is expanded and a run resumed. Before anything is recorded, a
    new run's plan is expanded (an unknown suite or an empty selection raises ConfigError) and its
    workload imported once; without an ``executor``, the device's adapter is resolved once, a local
    run's device (a resumed one's too) checked with it and the executor ``config`` asks for made
    with it (a cluster without the device is refused here). ``store`` is a store, or a function that
    opens one: it is called only once a new run's config is checked, so bad input makes no knowledge
    base. SIGINT and SIGTERM end the run cleanly (state ``interrupted``, the signal in the outcome);
    results already committed stay. ``workload_folder``: where a ``--workload`` module is imported
    from (default the current folder), as the executor's.
    """
    if resume:
        store = store() if callable(store) else store
        previous = store.get_run(resume)
        check_resumable(previous)
        config = RunConfig.from_dict(previous["config"])
        run_id = resume
    elif config is None:
        raise ConfigError("api.run needs a config, or resume=RUN_ID")
    else:
        run_id = new_run_id()
    adapter = None
    if executor is None:
        # The device's adapter, resolved once for the run: checked here (a Ray cluster's device
        # is on its nodes: checked there) and handed to the executor.
        from torchport.devices import get_adapter

        adapter = get_adapter(config.device)
        if config.executor == "local":
            check_device(config.device, adapter)
            check_reference_cache()
    tasks = expand(config)
    if not resume:
        check_workload(config, workload_folder)
        store = store() if callable(store) else store
    executor = executor or make_executor(config, adapter=adapter, workload_folder=workload_folder)
    try:
        done = store.results(run_id=run_id, keys=True) if resume else set()
        todo = [t for t in tasks if t.key not in done]
        if resume:
            store.update_run(run_id, state="running")
        else:
            store.create_run(
                run_id=run_id,
                command=command or command_line(),
                suite=config.suite,
                device=config.device,
                config=config.to_dict(),
                plan=[list(t.key) for t in tasks],
                labels=labels or {},
            )
    except BaseException:
        executor.close()  # its workers end with the run that could not be recorded
        raise
    on_plan(todo)
    outcome = RunOutcome(run_id=run_id, state="complete")

    def record(finished: Finished) -> None:
        result = checked(finished)
        if finished.environment is not None:
            env_id = store.update_run(run_id, environment=finished.environment)
            # Each result names the environment it ran in: a worker that started on another
            # torch or driver is visible, never overwritten.
            result.findings.setdefault("environment_id", env_id)
        store.add_results(run_id, [result])  # validated once, in checked()
        outcome.counts[result.status] = outcome.counts.get(result.status, 0) + 1
        on_result(result)

    # SIGINT is set explicitly: a shell that starts a job in the background leaves it ignored.
    before_term = signal.signal(signal.SIGTERM, _raise_interrupted)
    before_int = signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        for task in todo:
            executor.submit(task)
        pending = {t.key: t for t in todo}
        while pending:
            next_task = next(iter(pending.values()))
            on_start(next_task)
            finished = executor.next_result()
            if finished is None:
                break
            pending.pop(finished.task.key, None)
            record(finished)
    except _Interrupted as stop:
        executor.cancel()
        outcome.state, outcome.signal = "interrupted", stop.signum
    except ExecutorBroken as exc:
        executor.cancel()
        outcome.state, outcome.broken = "interrupted", str(exc)
    finally:
        signal.signal(signal.SIGTERM, before_term)
        signal.signal(signal.SIGINT, before_int)
        executor.close()
        store.update_run(run_id, state=outcome.state)
    return outcome


def doctor() -> dict:
    """Devices, versions and reasons, found in a child process (``runner.doctor``)."""
    from torchport.runner.doctor import diagnose

    return diagnose()
