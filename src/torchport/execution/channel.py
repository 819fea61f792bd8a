"""The event channel between a supervisor and its child process: JSON lines over a pipe.

The child writes events to an inherited file descriptor (its stdout and stderr stay free for
user code); the parent reads them with a deadline, so a silent child never blocks it.
"""

from __future__ import annotations

import json
import os
import select

from torchport.timing import clock


class Channel:
    """Child side: write one JSON event per line."""

    def __init__(self, fd: int):
        self.stream = os.fdopen(fd, "w", buffering=1)

    def emit(self, event: dict) -> None:
        self.stream.write(json.dumps(event, default=str) + "\n")
        self.stream.flush()


class LineReader:
    """Parent side: the next line from a pipe, or None at end of stream or past a deadline."""

    def __init__(self, fd: int):
        self.fd: int | None = fd
        self.buffer = b""

    def next_line(self, deadline: float) -> bytes | None:
        while b"\n" not in self.buffer:
            remaining = deadline - clock()
            if remaining <= 0:
                return None
            assert self.fd is not None, "read after close"
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            if not self.fill():
                return None
        return self.buffered_line()

    # For a supervisor that waits on many children at once (``select`` over their fds):
    def fileno(self) -> int | None:
        return self.fd

    def fill(self) -> bool:
        """Read what the pipe holds now (it is readable); False at end of stream."""
        assert self.fd is not None, "read after close"
        chunk = os.read(self.fd, 65536)
        self.buffer += chunk
        return bool(chunk)

    def buffered_line(self) -> bytes | None:
        """A complete line already read, if there is one; never waits."""
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
