"""Worker process: runs (case, mode) tasks sent by the supervisor, one at a time.

Protocol: tasks arrive as JSON lines on stdin (the run's config with the first, then only
when it changes: a task carries case, mode and its deadline); events go back as JSON lines
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
    from torchport.runner import ladders

    ladders.preload()

    try:
        adapter = get_adapter(args.device)
        adapter.prepare()
        _reset_compiler()  # the first one imports torch._dynamo: seconds on a busy host
        channel.emit({"event": "ready", "environment": fingerprint(adapter), "pid": os.getpid()})
    except Exception as exc:
        channel.emit({"event": "fatal", "error": error_value(exc)})
        return 3

    reference_cache: dict = {}
    config = None  # the run's config: sent with the first task, kept for the next ones
    for line in sys.stdin:
        task = json.loads(line)
        watchdog.arm(task.get("watchdog_s"))
        _reset_compiler()
        try:
            if "config" in task or config is None:
                config = RunConfig.from_dict(task["config"])
            case = find_case(config.suite, task["case"], workload=config.workload)
            ladder = ladders.ladder_class(ladders.ladder_name(case, config))
            result = ladder(
                case, task["mode"], config, adapter, channel.emit, reference_cache
            ).run()
        except Exception as exc:  # a bug outside the ladder's stages: still a result
            result = crashed(
                task["case"], task["mode"], stage="worker", error=error_value(exc)
            ).to_dict()
        watchdog.arm(None)
        channel.emit({"event": "result", "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
