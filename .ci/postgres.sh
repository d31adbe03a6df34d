#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the tests: `start` prints the DSN, `stop` removes it.
#   eval "$(.ci/postgres.sh start)"   # exports DEERMEM_TEST_DSN
#   .ci/postgres.sh stop
# Installs the Debian package when the server binaries are missing (CI runs as root).
set -euo pipefail

PGDATA="${DEERMEM_PGDATA:-/tmp/deermem-pg}"
PORT="${DEERMEM_PGPORT:-54329}"
DB="deermem_test"

find_bin() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
  done
  return 1
}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
  start)
    if ! BIN="$(find_bin)"; then
      echo "installing PostgreSQL (Debian package)..." >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
      BIN="$(find_bin)"
    fi
    if [ -f "$PGDATA/postmaster.pid" ]; then
      as_postgres "$BIN/pg_ctl" -D "$PGDATA" -m immediate stop >&2 || true
    fi
    rm -rf "$PGDATA"
    mkdir -p "$PGDATA"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$PGDATA"
    as_postgres "$BIN/initdb" -D "$PGDATA" -U postgres -A trust --no-sync >/dev/null
    as_postgres "$BIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w \
      -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$PGDATA -c fsync=off -c max_connections=200" \
      start >&2
    as_postgres "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB"
    echo "export DEERMEM_TEST_DSN=postgresql://postgres@127.0.0.1:$PORT/$DB"
    ;;
  stop)
    if BIN="$(find_bin)" && [ -f "$PGDATA/postmaster.pid" ]; then
      as_postgres "$BIN/pg_ctl" -D "$PGDATA" -m fast stop >&2 || true
    fi
    rm -rf "$PGDATA"
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
