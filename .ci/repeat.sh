#!/usr/bin/env bash
# Run the server-starting integration tests N times in a row, in CI's environment, and count.
#
#   .ci/repeat.sh                       # every file below, 20 runs each
#   .ci/repeat.sh --runs 1 tests/integration_tests/test_local_server.py
#   .ci/repeat.sh --runs 5 --no-postgres --no-browser FILE...
#
# Each run is one `python -m pytest FILE` (a fresh process, as CI and a newcomer run it). Nothing stops
# the loop: every failure is counted and its log kept. The table at the end gives, per file, the
# runs, the passes, the failures (pytest failed, or CI's rule: nothing may skip) and the first
# failure's short reason. Exit status: 0 when every run of every file passed.
#
# The environment is CI's (.ci/run): DEERMEM_REQUIRE_LLM=1, a PostgreSQL of its own on a free port
# (reused when DEERMEM_TEST_DSN is already set) with DEERMEM_REQUIRE_POSTGRES=1, Debian's Chromium
# with DEERMEM_REQUIRE_BROWSER=1, no OPENAI_* variables. --no-postgres / --no-browser leave those
# out (their tests then skip, and such a run is counted as skipped, not passed).
#
# Options: --runs N (default 20), --python PY (default: python), --logs DIR (default: a new
# temporary folder), --timeout S per run (default 1800).
set -uo pipefail
cd "$(dirname "$0")/.."

runs=20
python="${PYTHON:-python}"
logs=""
per_run=1800
postgres=1
browser=1
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    --timeout) per_run="$2"; shift 2 ;;
    --no-postgres) postgres=0; shift ;;
    --no-browser) browser=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "repeat.sh: unknown option $1" >&2; exit 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
case "$runs" in ''|*[!0-9]*|0) echo "repeat.sh: --runs needs a positive number" >&2; exit 2 ;; esac
if [ ${#files[@]} -eq 0 ]; then
  files=(
    tests/integration_tests/test_console_langgraph_server.py  # LangGraph server
    tests/integration_tests/test_local_server.py              # local LLM
    tests/integration_tests/test_real_llm.py
    tests/integration_tests/test_deerflow_backend_real_llm.py
    tests/integration_tests/test_console_server.py            # console
    tests/integration_tests/test_console_browser.py
    tests/integration_tests/test_console_api_postgres.py      # PostgreSQL
    tests/integration_tests/test_postgres_outage.py
    tests/integration_tests/test_replicas.py
    tests/integration_tests/test_many_writers.py
    tests/integration_tests/test_durable_pending.py
    tests/integration_tests/test_crash_safety.py              # crash tests
    tests/integration_tests/test_hardening_crashes.py
  )
fi
for file in "${files[@]}"; do
  [ -f "$file" ] || { echo "repeat.sh: no such test file: $file" >&2; exit 2; }
done
[ -n "$logs" ] || logs="$(mktemp -d -t deermem-repeat.XXXXXX)"
mkdir -p "$logs"

export DEERMEM_REQUIRE_LLM=1
unset OPENAI_API_KEY OPENAI_BASE_URL || true
if [ "$postgres" = 1 ]; then
  if [ -z "${DEERMEM_TEST_DSN:-}" ]; then
    pg_parent="$(mktemp -d -t deermem-repeat-pg.XXXXXX)"
    chmod 755 "$pg_parent"  # the server runs as the postgres user
    export DEERMEM_PGDATA="$pg_parent/data"
    DEERMEM_PGPORT="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    export DEERMEM_PGPORT
    echo "== PostgreSQL (its own, port $DEERMEM_PGPORT) =="
    eval "$(.ci/postgres.sh start)" || { echo "repeat.sh: PostgreSQL did not start" >&2; exit 1; }
    trap '.ci/postgres.sh stop >/dev/null 2>&1; rm -rf "$pg_parent"' EXIT
  fi
  export DEERMEM_REQUIRE_POSTGRES=1
fi
if [ "$browser" = 1 ]; then
  echo "== Chromium =="
  .ci/browser.sh || { echo "repeat.sh: no Chromium" >&2; exit 1; }
  export DEERMEM_REQUIRE_BROWSER=1
  export DEERMEM_ARTIFACTS="$logs/artifacts"
fi

declare -A passed failed skipped reason
for file in "${files[@]}"; do passed[$file]=0; failed[$file]=0; skipped[$file]=0; reason[$file]=""; done

for run in $(seq 1 "$runs"); do
  for file in "${files[@]}"; do
    name="$(basename "$file" .py)"
    log="$logs/$name.run$run.log"
    start=$(date +%s)
    timeout --kill-after=30 "$per_run" "$python" -m pytest "$file" -p no:cacheprovider >"$log" 2>&1
    status=$?
    seconds=$(( $(date +%s) - start ))
    summary="$(grep -E "^=+ .* in [0-9.]+s" "$log" | tail -n 1)"
    if [ "$status" -eq 0 ] && ! echo "$summary" | grep -q "skipped"; then
      passed[$file]=$(( ${passed[$file]} + 1 )); verdict="pass"; rm -f "$log"
    elif [ "$status" -eq 0 ]; then
      skipped[$file]=$(( ${skipped[$file]} + 1 )); verdict="skipped"
    else
      failed[$file]=$(( ${failed[$file]} + 1 )); verdict="FAIL"
      if [ -z "${reason[$file]}" ]; then
        if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
          why="timed out after ${per_run}s"
        else
          why="$(grep -m1 -E "^(FAILED|ERROR) " "$log" | sed -E 's/^(FAILED|ERROR) [^:]*:://')"
          [ -n "$why" ] || why="exit $status: $(tail -n 1 "$log")"
        fi
        reason[$file]="run $run: ${why:0:110} ($log)"
      fi
    fi
    printf '[run %d/%d] %-44s %-7s %4ds %s\n' "$run" "$runs" "$name" "$verdict" "$seconds" "$summary"
  done
done

echo
printf '%-44s %5s %6s %8s %8s  %s\n' "test file" "runs" "passed" "failed" "skipped" "first failure"
all_passed=1
for file in "${files[@]}"; do
  printf '%-44s %5d %6d %8d %8d  %s\n' "$(basename "$file")" "$runs" "${passed[$file]}" \
    "${failed[$file]}" "${skipped[$file]}" "${reason[$file]:--}"
  [ "${passed[$file]}" -eq "$runs" ] || all_passed=0
done
echo "logs of the runs that did not pass: $logs"
[ "$all_passed" = 1 ]
