"""Worker process: runs (case, mode) items sent by the supervisor, one at a time.

Protocol: tasks arrive as JSON lines on stdin; events go back as JSON lines on the file
descriptor given by ``--fd`` (stdout and stderr stay free for user code and go to a log).
Events: ready (with the environment fingerprint), stage (the stage now running), result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from torchport.runner.channel import Channel


def _reset_compiler() -> None:
    """Forget earlier cases' compiled frames: dynamo's recompile limits accumulate over a
    worker's life, and past them frames silently run eagerly."""
    try:
        from torchport.probes.compile_metrics import reset_dynamo
        reset_dynamo()
    except Exception:  # private API: a torch without it simply keeps its state
        pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", required=True)
    args = parser.parse_args(argv)
    channel = Channel(args.fd)

    from torchport.devices import get_adapter
    from torchport.runner.environment import fingerprint
    adapter = get_adapter(args.device)
    try:
        adapter.prepare()
        channel.emit({"event": "ready", "environment": fingerprint(adapter), "pid": os.getpid()})
    except Exception as exc:
        channel.emit({"event": "fatal", "error": {"type": type(exc).__name__, "message": str(exc),
                                                  "traceback": traceback.format_exc()}})
        return 3

    from torchport.cases.registry import find_case
    from torchport.runner.config import RunConfig
    from torchport.runner.ladder import Ladder
    from torchport.runner.op_ladder import OpLadder  # ops suite: a task per op, many samples
    reference_cache: dict = {}
    for line in sys.stdin:
        task = json.loads(line)
        config = RunConfig.from_dict(task["config"])
        _reset_compiler()
        try:
            case = find_case(config.suite, task["case"], workload=config.workload)
            ladder = OpLadder if getattr(case, "ladder", None) == "op" else Ladder
            result = ladder(case, task["mode"], config, adapter, channel.emit,
                            reference_cache).run()
        except Exception as exc:  # a bug outside the ladder's stages: still a result
            result = {"case": task["case"], "mode": task["mode"], "status": "crash",
                      "stage": "worker", "error": {"type": type(exc).__name__,
                                                   "message": str(exc),
                                                   "traceback": traceback.format_exc()}}
        channel.emit({"event": "result", "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
