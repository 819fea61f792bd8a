"""A child that dies with its parent: Linux ``prctl(PR_SET_PDEATHSIG)`` (through ctypes).

Called in a child right after the fork (a forked reader, ``kb/forked.py``) or between
fork and exec (``preexec_fn`` of uv's processes, ``matrix/envs.py``): when the parent is killed,
even by SIGKILL, which runs no handler of its own, the kernel sends the child ``signum``, so
no reader stays blocked writing into a pipe nobody reads and no ``uv pip install`` goes on
writing into a folder the next call may delete. Elsewhere (not Linux) it does nothing and
says so; the parent's own handlers (SIGTERM, SIGINT) still end its children.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _prctl():
    """libc's prctl, or None (not Linux, or no libc to load); found in the parent, so the
    child between fork and exec imports nothing."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(parent_pid: int, signum: int = signal.SIGKILL, prctl=None) -> bool:
    """Ask the kernel to send this process ``signum`` when its parent ends; if the parent
    (``parent_pid``, read before the fork) already ended, end now. False where the platform
    has no such request."""
    prctl = prctl or _prctl()
    if prctl is None or prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        return False
    # The parent may have died between the fork and the request: then nothing will come.
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signum)
    return True


def preexec(signum: int = signal.SIGKILL):
    """A ``subprocess.Popen(preexec_fn=...)`` that makes the child die with this process."""
    parent, prctl = os.getpid(), _prctl()
    return lambda: die_with_parent(parent, signum, prctl)
