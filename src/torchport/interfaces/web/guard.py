"""What every answer of the dashboard carries, and which requests it answers at all.

An unauthenticated server on localhost is open to DNS rebinding: a page on another site whose
name is made to resolve to 127.0.0.1 reaches it with its own name in ``Host``. The guard
answers only the names this server is meant to be reached by (localhost names; with
``--host NAME``, that name too) and puts the security headers on every response, errors
included: a content policy with no inline script, no framing, no MIME sniffing, no referrer.
"""

from __future__ import annotations

import re

LOCAL_HOSTS = frozenset(("localhost", "127.0.0.1", "::1"))
# Styles may be inline: uPlot sizes its elements through element.style. Scripts come only
# from /static (the charts' data is a non-executed application/json block).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


# RFC 9110's Host: a name (or IPv4 address) or a bracketed IPv6 address, then an optional
# numeric port; anything else (``localhost:80.evil.com``, ``localhost:80@evil.com``,
# ``[::1].evil.com``) names no host this server answers.
_HOST = re.compile(
    r"(?:\[(?P<v6>[0-9a-f:.]+(?:%[0-9a-z._~-]+)?)\]|(?P<name>[a-z0-9._-]+))(?::[0-9]{1,5})?"
)


def host_name(header: str) -> str | None:
    """``Host`` without its port, lower case, IPv6 brackets removed; None when it is not a
    name or an address with an optional numeric port."""
    found = _HOST.fullmatch(header.strip().lower())
    if found is None:
        return None
    return found.group("v6") or found.group("name")


def allowed_hosts(bound: str) -> frozenset[str] | None:
    """The localhost names and the name or address the server was bound to; None (any name)
    when bound to every address, which ``serve`` allows only with a token."""
    if bound in ("0.0.0.0", "::", ""):
        return None
    return LOCAL_HOSTS | {host_name(f"[{bound}]" if ":" in bound else bound) or bound.lower()}


class Guard:
    """ASGI middleware: 400 for a Host not allowed; security headers on every response."""

    def __init__(self, app, *, hosts: frozenset[str] | None):
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_guarded(message):
            if message["type"] == "http.response.start":
                message = dict(message, headers=[*message.get("headers", []), *HEADERS])
            await send(message)

        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
        if self.hosts is not None and host_name(host) not in self.hosts:
            from starlette.responses import PlainTextResponse

            response = PlainTextResponse(
                f"torchport: this server does not answer for host '{host[:100]}'; open it as "
                "http://localhost:PORT/ (or by the name given to serve --host)\n",
                status_code=400,
            )
            await response(scope, receive, send_guarded)
            return
        await self.app(scope, receive, send_guarded)
