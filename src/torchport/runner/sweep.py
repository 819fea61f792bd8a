"""A run: expand the plan, feed items to a worker, commit each result as it finishes."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from torchport.cases.registry import load_suite, select
from torchport.devices import get_adapter
from torchport.runner.config import COLD_WORKER_ENV, ConfigError, RunConfig
from torchport.runner.pool import Deadline, Worker, WorkerStartError

MAX_START_FAILURES = 2


@dataclass(frozen=True)
class Item:
    case: str
    mode: str
    case_version: int = 1
    skip_reason: str | None = None
    tags: tuple[str, ...] = ()


def expand(config: RunConfig) -> list[Item]:
    cases = select(load_suite(config.suite, workload=config.workload), config.cases,
                   config.exclude)
    items = [Item(c.id, mode, c.version, c.skip_reason, tuple(c.tags)) for c in cases
             for mode in config.modes if c.modes is None or mode in c.modes]
    if not items:
        can = sorted({m for c in cases for m in (c.modes or ())})
        raise ConfigError(f"the chosen cases run in mode {', '.join(can)} only, not "
                          f"{', '.join(config.modes)}; pass --modes {','.join(can)}")
    return items


def new_run_id() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def worker_env(config: RunConfig, adapter) -> dict[str, str]:
    """Worker environment: fallback made visible per op; strict switches when asked."""
    env = dict(os.environ)
    env.update(adapter.debug_env)
    if config.strict:
        for key in adapter.strict_unset:
            env.pop(key, None)
        env.update(adapter.strict_env)
    # A user's workload module is imported from where torchport was started.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def cold_worker_modes(config: RunConfig) -> tuple[str, ...]:
    """Modes whose tasks each get a fresh worker with empty compile caches: compile, when a
    requested probe asks for it (``Probe.cold_worker``)."""
    from torchport.probes.registry import load_probe
    wanted = "compile" in config.modes and any(load_probe(name).cold_worker
                                               for name in config.probes)
    return ("compile",) if wanted else ()


def run_cold(task: dict, deadline: Deadline, device: str, env: dict, adapter, log_dir: str,
             on_environment: Callable[[dict], None]) -> dict:
    """One task in a worker of its own whose compile caches start empty; both go afterwards.

    The ladder's first compiled step there is the cold compile a user meets in a new process;
    the compile probe's warm child reuses the cache that step filled.
    """
    root = tempfile.mkdtemp(prefix="torchport-cold-")
    worker = Worker(device, {**env, **adapter.cache_dirs(root), COLD_WORKER_ENV: root}, log_dir)
    try:
        on_environment(worker.start())
        return worker.execute(task, deadline)
    finally:
        worker.kill()  # also on SIGTERM/SIGINT: nothing of this task is left to save
        shutil.rmtree(root, ignore_errors=True)


def record_env(store, run_id: str, environment: dict) -> None:
    store.set_environment(run_id, store.put_environment(environment))


class _Terminated(Exception):
    pass


def _raise_terminated(signum, frame):
    raise _Terminated()


def execute(store, run_id: str, config: RunConfig, items: list[Item],
            on_result: Callable[[dict], None] = lambda r: None,
            on_start: Callable[[Item], None] = lambda i: None) -> str:
    """Run every item not already recorded; return the run's final state."""
    done = store.done_items(run_id)
    todo = [i for i in items if (i.case, i.mode) not in done]
    log_dir = tempfile.mkdtemp(prefix="torchport-logs-")
    deadline = Deadline(case_s=config.timeout_s, compile_s=config.compile_timeout_s)
    adapter = get_adapter(config.device)
    env = worker_env(config, adapter)
    worker, start_failures = None, 0
    # SIGTERM and SIGINT both end the sweep cleanly (run marked interrupted). SIGINT is set
    # explicitly: a shell that starts a job in the background leaves it ignored.
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    task_config = config.to_dict()
    cold_modes = cold_worker_modes(config)
    try:
        for item in todo:
            on_start(item)
            if item.skip_reason:
                result = {"case": item.case, "mode": item.mode, "case_version": item.case_version,
                          "status": "skip", "findings": {"tags": list(item.tags)},
                          "error": {"type": "Skip", "message": item.skip_reason}}
            else:
                task = {"case": item.case, "mode": item.mode, "config": task_config}
                try:
                    if item.mode in cold_modes:
                        result = run_cold(task, deadline, config.device, env, adapter,
                                          log_dir, lambda e: record_env(store, run_id, e))
                    else:
                        if worker is None or not worker.alive:
                            worker = Worker(config.device, env, log_dir)
                            record_env(store, run_id, worker.start())
                        result = worker.execute(task, deadline)
                    start_failures = 0
                except WorkerStartError as exc:
                    start_failures += 1
                    if item.mode not in cold_modes:
                        worker = None  # it killed itself; the next item starts another
                    result = {"case": item.case, "mode": item.mode, "status": "crash",
                              "stage": "worker_start", "error": {
                                  "type": "WorkerStartError", "message": str(exc)}}
                    store.add_result(run_id, result)
                    on_result(result)
                    if start_failures >= MAX_START_FAILURES:
                        raise
                    continue
            result.setdefault("case_version", item.case_version)
            store.add_result(run_id, result)
            on_result(result)
    except (KeyboardInterrupt, _Terminated):
        if worker is not None:
            worker.kill()
        store.finish_run(run_id, "interrupted")
        return "interrupted"
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        if worker is not None and worker.proc is not None:
            worker.close()
    store.finish_run(run_id, "complete")
    return "complete"


def command_line() -> str:
    return " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])
