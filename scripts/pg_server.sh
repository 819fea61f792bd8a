#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests, benchmarks and demos, from Debian's `postgresql` package
# or, where that is not installed, from the `pgserver` wheel (PostgreSQL's own binaries in a pip
# package, part of the test extra) in the Python named by $PYTHON (default python3); or from the
# folder $TORCHPORT_PG_BIN:
#
#   scripts/pg_server.sh start DIR PORT   # prints the superuser's URL (no password: trust)
#   scripts/pg_server.sh stop DIR
#
# The cluster lives in DIR (data, log, socket) and listens on 127.0.0.1:PORT and on a socket in
# DIR. Connections over the socket are trusted; over TCP they need a password (scram), so a
# wrong one can be tested. initdb and pg_ctl refuse root: as root they run as `postgres`, or as
# `nobody` where there is no such user (a machine without Debian's package).
# fsync is off: a test server, never a team's.
set -euo pipefail
cmd=${1:?usage: pg_server.sh start DIR PORT | stop DIR}
dir=$(realpath -m "${2:?DIR missing}")
bin=${TORCHPORT_PG_BIN:-}
[ -n "$bin" ] || bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ]; then
    bin=$("${PYTHON:-python3}" -c 'import os, pgserver
print(os.path.join(os.path.dirname(pgserver.__file__), "pginstall", "bin"))' 2>/dev/null || true)
fi
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin, no pgserver package);" \
        "apt-get install -y postgresql, or pip install pgserver" >&2
    exit 2
fi
owner=postgres
id -u postgres >/dev/null 2>&1 || owner=nobody
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$owner" -- "$@"; else "$@"; fi
}
case $cmd in
start)
    port=${3:?PORT missing}
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then chown "$owner" "$dir"; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth-local=trust \
            --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 -o \
        "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off" \
        start >/dev/null || { tail -n 20 "$dir/log" >&2; exit 1; }
    echo "postgresql://postgres@/postgres?host=$dir&port=$port"
    ;;
stop)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null
    ;;
*)
    echo "usage: pg_server.sh start DIR PORT | stop DIR" >&2
    exit 2
    ;;
esac
