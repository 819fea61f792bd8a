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

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from torchport.kb.base import StoreError

P = TypeVar("P")
T = TypeVar("T")
U = TypeVar("U")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# The read ends this process holds of its children's pipes: a child forked later closes them,
# so a child whose parent died gets EPIPE writing its answer instead of blocking forever on
# a pipe another child keeps open.
_READ_ENDS: set = set()

# The signals a command turns into exceptions (interfaces/cli: Terminated, KeyboardInterrupt).
_HELD = {signal.SIGTERM, signal.SIGINT}


class Child:
    """``work()`` running in a forked child: ``value()`` waits for what it returned (an error
    in the child is raised here as a StoreError naming it); leaving the ``with`` block ends a
    child whose value was never asked for (the caller failed first). The child dies with this
    process (``lifeline.die_with_parent``: SIGKILL when the parent ends, however it ends) and
    holds no pipe end but its own write end."""

    def __init__(self, work: Callable[[], Any]):
        for stream in (sys.stdout, sys.stderr):  # else the child writes what is buffered again
            stream.flush()
        import multiprocessing  # here: a command that never forks does not import it

        from torchport.lifeline import _prctl, die_with_parent

        context = multiprocessing.get_context("fork")
        self._receive, send = context.Pipe(duplex=False)
        parent, prctl = os.getpid(), _prctl()

        def child() -> None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            die_with_parent(parent, prctl=prctl)
            for end in list(_READ_ENDS):
                end.close()
            try:
                answer: tuple[str, Any] = ("value", work())
            except BaseException as exc:  # the child's failure is the caller's to report
                answer = ("error", f"{type(exc).__name__}: {exc}")
            send.send(answer)

        _READ_ENDS.add(self._receive)  # its own child closes it too: it only writes
        self._process = context.Process(target=child, name="torchport-part", daemon=True)
        # A SIGTERM or Ctrl-C that lands during the fork would run its handler inside an
        # at-fork callback (logging's, multiprocessing's), where the exception it raises is
        # printed and dropped: the command would go on, its children with it. Held until the
        # fork is done, it is raised here, where `with` blocks see it (docs/reliability.md).
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        try:
            self._process.start()
        finally:
            send.close()
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except BaseException:
            self.__exit__()
            raise

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
        _READ_ENDS.discard(self._receive)
        self._receive.close()
        if self._process.is_alive():
            self._process.kill()
        self._process.join()


def spread(
    parts: Sequence[P], here: Callable[[P], T], apart: Callable[[P], U]
) -> tuple[T, list[U]]:
    """``apart(part)`` for each part but the first, each in a forked child started now, and
    ``here(parts[0])`` in this process meanwhile: its value and theirs, in the parts' order
    (a child's failure raised here; the children of a failed ``here`` ended)."""
    with contextlib.ExitStack() as stack:
        children = [
            stack.enter_context(Child(functools.partial(apart, part))) for part in parts[1:]
        ]
        mine = here(parts[0])
        return mine, [child.value() for child in children]


def workers() -> int:
    """How many parts a long read is cut into here: a core each where a child can help
    (``available``), else one."""
    return cores() if available() else 1


def available() -> bool:
    """Whether a part is worth a child here: the platform forks safely, there is a core for
    it, and this process runs one thread (a command's; a fork copies only the calling thread,
    so a lock another one held, a server's, would stay held in the child)."""
    return sys.platform.startswith("linux") and cores() >= 2 and threading.active_count() == 1
