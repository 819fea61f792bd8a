"""A real PostgreSQL server for the tests: started once per session by scripts/pg_server.sh
(Debian's `postgresql` package, else the `pgserver` wheel of the test extra; initdb and pg_ctl
as the `postgres` user, or `nobody`, when root) on a free
port with its socket in a private folder, stopped at the end; or the server named by
TORCHPORT_TEST_PG_URL (a superuser's URL). Each test gets a database of its own.

If the server cannot be started, the PostgreSQL tests fail with the reason (pytest.fail).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pg_server.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server() -> tuple[str, str]:
    """(superuser URL over the socket, the server's folder); pytest.fail if it cannot start."""
    folder = tempfile.mkdtemp(prefix="tp-pg-")  # short: a socket path has a length limit
    proc = subprocess.run(
        ["bash", str(SCRIPT), "start", folder, str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHON=sys.executable),  # whose pgserver, without Debian's package
    )
    if proc.returncode != 0:
        pytest.fail(
            "the PostgreSQL test server did not start (scripts/pg_server.sh: "
            f"{(proc.stderr or proc.stdout).strip()[-800:]}); install Debian's postgresql "
            "package (apt-get install -y postgresql) or pgserver (pip install pgserver), or "
            "set TORCHPORT_TEST_PG_URL",
            pytrace=False,
        )
    return proc.stdout.strip().splitlines()[-1], folder


def stop_server(folder: str) -> None:
    subprocess.run(
        ["bash", str(SCRIPT), "stop", folder],
        capture_output=True,
        timeout=60,
        env=dict(os.environ, PYTHON=sys.executable),
    )


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (path replaced, query kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def tcp_url(url: str, *, user: str, password: str, database: str) -> str:
    """The server of ``url`` over TCP (127.0.0.1, password authentication)."""
    port = dict(p.split("=", 1) for p in urlsplit(url).query.split("&") if "=" in p)["port"]
    return f"postgresql://{user}:{password}@127.0.0.1:{port}/{database}"


def admin(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def create_database(server_url: str) -> tuple[str, str]:
    """A new empty database on the server: (its URL, its name)."""
    name = f"tp_{uuid.uuid4().hex[:12]}"
    with admin(server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return with_database(server_url, name), name


def drop_database(server_url: str, name: str) -> None:
    with admin(server_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_from_env() -> str | None:
    return os.environ.get("TORCHPORT_TEST_PG_URL") or None
