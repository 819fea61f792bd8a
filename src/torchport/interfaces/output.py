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
import secrets
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


def _unnamed(folder: str, mode: int) -> int | None:
    """A file with no name yet in ``folder`` (Linux ``O_TMPFILE``): a process killed while
    writing it, even by SIGKILL, leaves nothing behind. None where there is none (another
    platform, a file system without it, no /proc to name it by later)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_RDWR, mode)  # read back where it cannot be linked
    except OSError:
        return None


@contextlib.contextmanager
def output_file(path: str, *, binary: bool = False) -> Iterator[IO]:
    """A file to write ``path``'s new content into; on a clean exit it replaces ``path`` in
    one rename, on any error nothing at ``path`` changes and no temporary file is left (an
    unnamed file until the content is whole, so a SIGKILL leaves none either; else a hidden
    ``.NAME.xxxx.tmp`` that SIGINT and SIGTERM remove: the CLI raises them as exceptions)."""
    path = os.fspath(path)
    check_target(path)
    folder = os.path.dirname(os.path.abspath(path))
    umask = os.umask(0)
    os.umask(umask)
    fd = _unnamed(folder, 0o666 & ~umask)
    temp: str | None = None
    try:
        if fd is None:
            fd, temp = tempfile.mkstemp(
                dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
            )
            os.fchmod(fd, 0o666 & ~umask)  # what open() would have made, not mkstemp's 0600
    except OSError as exc:
        raise OutputError(f"cannot write '{path}' ({exc.strerror}); pass another path") from None
    try:
        f: IO = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            if temp is None:  # named now that it is whole, for the one rename below
                temp = _name_of(f.fileno(), folder, os.path.basename(path))
        check_target(path)  # something may have been put there meanwhile
        os.replace(temp, path)
    except OSError as exc:
        if temp is not None:
            _remove(temp)
        raise OutputError(
            f"cannot write '{path}' ({exc.strerror or exc}); nothing was written: free space "
            "or pass another path"
        ) from None
    except BaseException:
        if temp is not None:
            _remove(temp)
        raise


def _name_of(fd: int, folder: str, base: str) -> str:
    """A hidden name in ``folder`` for the unnamed file ``fd``: linked through /proc, or
    (where the file system refuses that link, an overlay's EXDEV) copied into a new file."""
    # linkat(AT_SYMLINK_FOLLOW): os.link takes that call only when given a folder's fd
    where = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(100):
            name = f".{base}.{secrets.token_hex(4)}.tmp"
            try:
                os.link(f"/proc/self/fd/{fd}", name, src_dir_fd=where, dst_dir_fd=where)
                return os.path.join(folder, name)
            except FileExistsError:
                continue
            except OSError:
                break
    finally:
        os.close(where)
    copy, temp = tempfile.mkstemp(dir=folder, prefix=f".{base}.", suffix=".tmp")
    try:
        os.fchmod(copy, os.fstat(fd).st_mode & 0o777)
        offset = 0
        while chunk := os.pread(fd, 1 << 20, offset):
            os.write(copy, chunk)
            offset += len(chunk)
        os.fsync(copy)
    except BaseException:
        os.close(copy)
        _remove(temp)
        raise
    os.close(copy)
    return temp


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
