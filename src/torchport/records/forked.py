"""Part of a long read done by a forked child process, on another core, while this process
does the rest: an export's or a comparison's Python work (building lines, deciding and
formatting pairs) holds the interpreter's lock, so a thread cannot share it; a child can.

The child is forked (nothing is imported again, nothing pickled on the way in) and shares
nothing with this process afterwards: the work opens its own connections (a database
connection never crosses a fork) and sends back one picklable value. Where the platform does
not fork (Windows; macOS, whose system libraries are not fork-safe), or with one core,
``available`` says so and the caller does all the work itself.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from torchport.records.base import StoreError


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class Child:
    """``work()`` running in a forked child: ``value()`` waits for what it returned (an error
    in the child is raised here as a StoreError naming it); leaving the ``with`` block ends a
    child whose value was never asked for (the caller failed first)."""

    def __init__(self, work: Callable[[], Any]):
        for stream in (sys.stdout, sys.stderr):  # else the child writes what is buffered again
            stream.flush()
        context = multiprocessing.get_context("fork")
        self._receive, send = context.Pipe(duplex=False)

        def child() -> None:
            try:
                answer: tuple[str, Any] = ("value", work())
            except BaseException as exc:  # the child's failure is the caller's to report
                answer = ("error", f"{type(exc).__name__}: {exc}")
            send.send(answer)

        self._process = context.Process(target=child, name="torchport-part", daemon=True)
        self._process.start()
        send.close()

    def value(self) -> Any:
        try:
            kind, value = self._receive.recv()
        except EOFError:
            self._process.join()
            raise StoreError(
                "a helper process reading part of the knowledge base ended without an answer"
                f" (exit code {self._process.exitcode})"
            ) from None
        self._process.join()
        if kind == "error":
            raise StoreError(f"a helper process reading part of the knowledge base failed: {value}")
        return value

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self._receive.close()
        if self._process.is_alive():
            self._process.kill()
        self._process.join()


def available() -> bool:
    """Whether a part is worth a child here: the platform forks safely, there is a core for
    it, and this process runs one thread (a command's; a fork copies only the calling thread,
    so a lock another one held, a server's, would stay held in the child)."""
    return sys.platform.startswith("linux") and cores() >= 2 and threading.active_count() == 1
