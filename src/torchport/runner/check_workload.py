"""Check a user's workload factory in a child process, before a run records anything.

    python -m torchport.runner.check_workload --path MODULE:FACTORY [--batch N] [--seq N] --fd FD

The factory is user code: it may hang, crash the interpreter or call ``sys.exit``. Run here, in
a supervised child held to a deadline, whatever it does becomes one line for the user
(``check``) and never escapes the tool's exit-2 contract. Events: result {"ok": true} or
{"ok": false, "message": ...}.
"""

from __future__ import annotations

import argparse
import os
import sys

from torchport import settings
from torchport.execution.channel import Channel
from torchport.execution.child import Child, LogFolder, Watchdog
from torchport.runner.plan import WORKLOAD_PATH_ENV
from torchport.timing import clock

CHECK_TIMEOUT_S = 120.0
CHECK_TIMEOUT_ENV = "TORCHPORT_WORKLOAD_CHECK_TIMEOUT_S"  # tests shorten it


def check(
    path: str, *, batch: int | None, seq: int | None, folder: str, timeout_s: float | None = None
) -> str | None:
    """None when the factory is usable; else one line saying what is wrong."""
    timeout_s = timeout_s or settings.value(CHECK_TIMEOUT_ENV) or CHECK_TIMEOUT_S
    logs = LogFolder(prefix="torchport-check-")
    args = (
        ["--path", path]
        + (["--batch", str(batch)] if batch else [])
        + (["--seq", str(seq)] if seq else [])
    )
    child = Child(
        "torchport.runner.check_workload",
        args,
        env={**os.environ, WORKLOAD_PATH_ENV: folder},
        log_dir=logs.path,
        name="check",
    )
    try:
        deadline = clock() + timeout_s
        event = child.next_event(deadline)
        timed_out = event is None and clock() >= deadline
        child.wait_exit(5)
        child.kill()
        if event is not None and event.get("event") == "result":
            return None if event.get("ok") else str(event.get("message"))
        if timed_out:
            return (
                f"--workload {path}: the factory did not return within {timeout_s:g} s "
                "(it was stopped); make it build a small model quickly"
            )
        return (
            f"--workload {path}: the factory ended the process "
            f"({child.exit_description()}) instead of returning a workload: "
            f"{child.tail(400).strip()[-300:]}"
        )
    finally:
        child.kill()
        logs.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--seq", type=int)
    args = parser.parse_args(argv)
    channel = Channel(args.fd)
    Watchdog()
    # the folder (WORKLOAD_PATH_ENV, set by the caller) is on sys.path: execution/child.py
    from torchport.cases.base import Size
    from torchport.cases.workload import WorkloadCase, WorkloadError

    try:
        WorkloadCase(args.path).build(seed=0, size=Size(batch=args.batch, seq=args.seq))
    except WorkloadError as exc:
        channel.emit({"event": "result", "ok": False, "message": str(exc)})
    except Exception as exc:
        channel.emit(
            {
                "event": "result",
                "ok": False,
                "message": f"--workload {args.path}: the factory raised "
                f"{type(exc).__name__}: {exc}",
            }
        )
    else:
        channel.emit({"event": "result", "ok": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
