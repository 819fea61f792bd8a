#!/usr/bin/env bash
# What `make test` needs beyond the venv, checked before any test runs: the PostgreSQL store tests
# start their own server from Debian's `postgresql` package (scripts/pg_server.sh; or name a
# server with TORCHPORT_TEST_PG_URL) and the browser tests drive Debian's `chromium` (Playwright
# cannot download its own browser here). Without them those tests would fail, never skip, after
# minutes of other tests: say so at once, in one line, with the command that installs them.
set -euo pipefail
missing=()
if [ -z "${TORCHPORT_TEST_PG_URL:-}" ] && ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
    missing+=(postgresql)
fi
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo "
    echo "make test: missing ${missing[*]} (system packages the PostgreSQL and browser tests use);" \
        "install: ${sudo}apt-get install -y ${missing[*]}" >&2
    exit 2
fi
