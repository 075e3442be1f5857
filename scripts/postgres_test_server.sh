#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests and CI: unix socket only (no port to clash), fsync off.
#
#   scripts/postgres_test_server.sh start DIR   # creates DIR/data, starts the server, prints its URL
#   scripts/postgres_test_server.sh stop DIR    # stops it (immediate: the data is thrown away anyway)
#   scripts/postgres_test_server.sh pause DIR   # stops it cleanly, keeping its data (a test's outage)...
#   scripts/postgres_test_server.sh resume DIR  # ...and starts it again on that data
#
# initdb refuses to run as root, so as root the server runs as the `postgres` user (Debian's
# package creates it); as anyone else it runs as that user. The binaries: $PGBIN, else the
# newest /usr/lib/postgresql/*/bin, else initdb on the PATH.
set -euo pipefail

die() { printf 'postgres_test_server: %s\n' "$*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: $0 start|stop|pause|resume DIR"
action=$1
root=$2

if [[ -z "${PGBIN:-}" ]]; then
    PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    if [[ -z "$PGBIN" ]] && command -v initdb >/dev/null 2>&1; then
        PGBIN=$(dirname "$(command -v initdb)")
    fi
fi
[[ -n "$PGBIN" && -x "$PGBIN/initdb" && -x "$PGBIN/pg_ctl" ]] \
    || die "no PostgreSQL binaries (install Debian's postgresql package, or set PGBIN)"

as_server() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

serve() {
    as_server "$PGBIN/pg_ctl" -D "$root/data" -l "$root/log" -w -s \
        -o "-c listen_addresses='' -k $root -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        start || { cat "$root/log" >&2; die "the server did not start"; }
}

case "$action" in
    start)
        mkdir -p "$root"
        root=$(cd "$root" && pwd)
        # Socket paths are limited to ~107 bytes: the socket lives in $root itself.
        [[ ${#root} -le 80 ]] || die "directory path too long for a unix socket: $root"
        if [[ $(id -u) -eq 0 ]]; then
            id postgres >/dev/null 2>&1 || die "running as root needs the 'postgres' user (initdb refuses root)"
            chown postgres: "$root"
        fi
        as_server "$PGBIN/initdb" -D "$root/data" -U council --auth=trust -E UTF8 --no-locale --no-sync \
            >"$root/initdb.log" 2>&1 || { cat "$root/initdb.log" >&2; die "initdb failed"; }
        serve
        printf 'postgresql://council@/postgres?host=%s\n' "$root"
        ;;
    stop)
        [[ -d "$root/data" ]] || exit 0
        as_server "$PGBIN/pg_ctl" -D "$root/data" -m immediate -w -s stop || true
        ;;
    pause)
        # Fast, not immediate: with synchronous_commit off an immediate stop loses the last commits.
        as_server "$PGBIN/pg_ctl" -D "$root/data" -m fast -w -s stop
        ;;
    resume)
        [[ -d "$root/data" ]] || die "no server's data in $root"
        root=$(cd "$root" && pwd)
        serve
        ;;
    *)
        die "usage: $0 start|stop|pause|resume DIR"
        ;;
esac
