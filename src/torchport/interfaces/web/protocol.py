"""The HTTP protocol ``serve`` speaks: uvicorn's h11 protocol, with the security headers on
the answers uvicorn makes itself (its "400 Invalid HTTP request received." for a request line
it cannot parse, its 500 when the application ends without answering): the guard
(guard.py) puts them on every answer the application makes, these never reach it."""

from __future__ import annotations

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from torchport.interfaces.web.guard import HEADERS


class _Connection(h11.Connection):
    """An h11 connection whose every response carries the security headers (once)."""

    def send(self, event):
        if isinstance(event, h11.Response):
            have = {name.lower() for name, _ in event.headers}
            extra = [(k, v) for k, v in HEADERS if k not in have]
            if extra:
                event = h11.Response(
                    status_code=event.status_code,
                    headers=[*event.headers, *extra],
                    reason=event.reason,
                    http_version=event.http_version,
                )
        return super().send(event)


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol over ``_Connection`` (``uvicorn.Config(http=GuardedH11)``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.conn.__class__ = _Connection  # the one uvicorn made, its settings kept
