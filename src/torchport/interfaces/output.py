"""Every file torchport writes for the user (export, baseline save, report) goes through
``output_file``: to a regular file or a new path only, whole or not at all.

A device node, a FIFO, a symlink or a directory at the path is refused in one line (as root,
``-o /dev/null`` would otherwise replace the null device with a regular file). The content goes
to a hidden temporary file in the same folder, is flushed to disk, then renamed over the path
in one step; a write error (a full disk, a quota) removes the temporary file and leaves the
path as it was.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from typing import IO

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class OutputError(ValueError):
    """The file cannot be written; the message names the path, the reason and the fix."""


def check_target(path: str) -> None:
    """Raise OutputError unless ``path`` is a regular file or does not exist yet, in a
    folder that does."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(f"cannot write '{path}' ({exc.strerror}); pass another path") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise OutputError(
            f"'{path}' is {kind}; torchport writes only a regular file or a new path: "
            "pass another path"
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OutputError(f"cannot write '{path}': the folder {folder} does not exist")


@contextlib.contextmanager
def output_file(path: str, *, binary: bool = False) -> Iterator[IO]:
    """A file to write ``path``'s new content into; on a clean exit it replaces ``path`` in
    one rename, on any error nothing at ``path`` changes and no temporary file is left."""
    path = os.fspath(path)
    check_target(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write '{path}' ({exc.strerror}); pass another path") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # what open() would have made, not mkstemp's 0600
        f: IO = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        check_target(path)  # something may have been put there meanwhile
        os.replace(temp, path)
    except OSError as exc:
        _remove(temp)
        raise OutputError(
            f"cannot write '{path}' ({exc.strerror or exc}); nothing was written: free space "
            "or pass another path"
        ) from None
    except BaseException:
        _remove(temp)
        raise


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
