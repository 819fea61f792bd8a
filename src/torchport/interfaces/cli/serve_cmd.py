"""torchport serve: the read-only web dashboard over a knowledge base (extra ``[web]``)."""

import ipaddress
import socket

import click

from torchport.interfaces.cli import UsageProblem
from torchport.interfaces.cli.common import db_option, open_db


def is_loopback(host: str) -> bool:
    """Only this machine can reach ``host`` (localhost, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost may resolve to anything
        return False


def need_web_extra() -> None:
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UsageProblem(
            f"this command needs the web extra ({exc.name} is missing): "
            "pip install 'torchport[web]'"
        ) from None


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a taken port is one clear line (exit 2)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageProblem(
            f"cannot listen on {host}:{port}: {exc.strerror}; pass another --port or --host"
        ) from None
    return sock


@click.command("serve")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=int, help="0: any free port.")
@click.option(
    "--token",
    envvar="TORCHPORT_TOKEN",
    default=None,
    help="Every request must carry it (needed to listen beyond localhost); or $TORCHPORT_TOKEN.",
)
@click.option(
    "--artifacts",
    default="artifacts",
    show_default=True,
    help="The folder torchport runs wrote their profile traces to (./artifacts where the run "
    "started): the only files served.",
)
def command(db, host, port, token, artifacts):
    """Browse the knowledge base in a web browser (read-only): runs, a run's matrix and
    plots, a case's history, compare, ops on the host, search. Every page has a JSON twin
    (PATH.json or Accept: application/json)."""
    if not is_loopback(host) and not token:
        raise UsageProblem(
            f"--host {host} is reachable from other machines: pass --token TOKEN (or set "
            "TORCHPORT_TOKEN) so every request must carry it, or keep --host 127.0.0.1"
        )
    need_web_extra()
    import uvicorn

    from torchport.interfaces.web.app import create_app
    from torchport.interfaces.web.guard import allowed_hosts
    from torchport.interfaces.web.protocol import GuardedH11

    store = open_db(db)
    sock = bind(host, port)
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    gate = "; requests need the token" if token else ""
    click.echo(f"torchport: serving {store.url} read-only at http://{shown}:{bound}/{gate}")
    app = create_app(store, token=token, artifacts=artifacts, hosts=allowed_hosts(host))
    # h11 with the security headers on uvicorn's own answers (httptools, when installed,
    # would answer a malformed request without them)
    config = uvicorn.Config(app, log_level="warning", http=GuardedH11)
    uvicorn.Server(config).run(sockets=[sock])
