"""Worker process: runs (case, mode) tasks sent by the supervisor, one at a time.

Protocol: JSON lines on stdin: the run's config on a line of its own (``{"config": ...}``,
once, before the first task), then tasks, each with case, mode, its deadline and only the
fields of the run's config it changes (``changes``; the worker rebuilds the task's config
from the run's and those); events go back as JSON lines
on the file descriptor given by ``--fd`` (stdout and stderr stay free for user code and go
to a log).
Events: ready (with the environment fingerprint), fatal, stage (the stage now running), result.
A watchdog ends the worker and its process group if the supervisor dies or a task runs past
its own deadline (``watchdog_s`` in the task), so no worker outlives its run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from torchport.execution.channel import Channel
from torchport.execution.child import Watchdog
from torchport.records.result import crashed, error_value


def _reset_compiler() -> None:
    """Forget earlier cases' compiled frames: dynamo's recompile limits accumulate over a
    worker's life, and past them frames silently run eagerly."""
    try:
        from torchport.instruments.compile_metrics import reset_dynamo

        reset_dynamo()
    except Exception:  # private API: a torch without it simply keeps its state
        pass


def resources() -> dict:
    """What this worker holds now, read after each task (the supervisor recycles a worker past its
    watermarks, runner/executors/local.py): memory maps (``/proc/self/maps``: a backend that keeps
    every compiled executable, torch_xla's, runs into ``vm.max_map_count``) and resident set."""
    found: dict = {"pid": os.getpid()}
    try:
        with open("/proc/self/maps", "rb") as maps:
            found["maps"] = sum(1 for _ in maps)
        with open("/proc/self/statm") as statm:
            found["rss_bytes"] = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: nothing to watch
        pass
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", required=True)
    args = parser.parse_args(argv)
    channel = Channel(args.fd)
    watchdog = Watchdog()
    # the user's workload folder (WORKLOAD_PATH_ENV) is on sys.path: execution/child.py

    # Imported before "ready": a task's deadline starts when it is sent, and should not pay
    # for the worker's own imports (slow on a busy host, with workers side by side).
    from torchport.cases.registry import find_case
    from torchport.config import RunConfig
    from torchport.devices import get_adapter
    from torchport.execution.environment import fingerprint
    from torchport.runner.ladders import table

    table.preload()

    try:
        adapter = get_adapter(args.device)
        adapter.prepare()
        _reset_compiler()  # the first one imports torch._dynamo: seconds on a busy host
        channel.emit({"event": "ready", "environment": fingerprint(adapter), "pid": os.getpid()})
    except Exception as exc:
        channel.emit({"event": "fatal", "error": error_value(exc)})
        return 3

    reference_cache: dict = {}
    run_config: RunConfig | Exception = RuntimeError("a task came before the run's config")
    for line in sys.stdin:
        task = json.loads(line)
        if "case" not in task:  # the run's config: sent once, before the first task
            try:
                run_config = RunConfig.from_dict(task["config"])
            except Exception as exc:  # each task says so, as a result
                run_config = exc
            continue
        watchdog.arm(task.get("watchdog_s"))
        _reset_compiler()
        try:
            if isinstance(run_config, Exception):
                raise run_config
            config = run_config.with_changes(task.get("changes") or {})
            case = find_case(config.suite, task["case"], workload=config.workload)
            ladder = table.ladder_class(table.ladder_name(case, config))
            result = ladder(
                case, task["mode"], config, adapter, channel.emit, reference_cache
            ).run()
        except Exception as exc:  # a bug outside the ladder's stages: still a result
            result = crashed(
                task["case"], task["mode"], stage="worker", error=error_value(exc)
            ).to_dict()
        watchdog.arm(None)
        channel.emit({"event": "result", "result": result, "resources": resources()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
