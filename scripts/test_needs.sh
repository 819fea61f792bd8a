#!/usr/bin/env bash
# What `make test` needs beyond the venv, checked before any test runs. The browser tests drive
# Debian's `chromium` (Playwright cannot download its own browser here). The PostgreSQL store
# tests start their own server (scripts/pg_server.sh) from Debian's `postgresql` package or from
# the `pgserver` wheel the test extra installs (or use the server TORCHPORT_TEST_PG_URL names).
# Without them those tests would fail, never skip, after minutes of other tests. As root where
# apt-get exists (a fresh container, CI: as .ci/run does) they are installed here; otherwise
# say so at once, in one line, with the command that installs what is missing.
#   scripts/test_needs.sh [PYTHON]   # PYTHON: the venv's, once it exists
set -euo pipefail
python=${1:-}
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ -z "${TORCHPORT_TEST_PG_URL:-}" ] && ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
    # Without Debian's package the venv's pgserver serves; before the venv exists, the install
    # that follows brings it.
    if [ -n "$python" ] && [ -x "$python" ] && ! "$python" -c 'import pgserver' 2>/dev/null; then
        missing+=(postgresql)
    fi
fi
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "make test: installing ${missing[*]} (system packages the browser and PostgreSQL tests use)" >&2
    if DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2; then
        exit 0
    fi
    echo "make test: apt-get could not install ${missing[*]}; install them, then run make test again" >&2
    exit 2
fi
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo "
    echo "make test: missing ${missing[*]} (system packages the browser and PostgreSQL tests use);" \
        "install: ${sudo}apt-get install -y ${missing[*]}" >&2
    exit 2
fi
