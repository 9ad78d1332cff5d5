#!/usr/bin/env bash
# The whole test suite against real servers: install and start what the tests need (idempotent,
# cached in the usual user caches), run pytest, stop the servers this script started.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
export PATH="$VENV/bin:$PATH"
export CKPTBENCH_STATE="${CKPTBENCH_STATE:-$ROOT/.state}"

SERVERS="${CKPTBENCH_TEST_SERVERS:-redis hbase minio nfs}"
started=()
cleanup() {
  if [ ${#started[@]} -gt 0 ]; then
    "$VENV/bin/bench" services down "${started[@]}" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
for s in $SERVERS; do
  if ! "$VENV/bin/bench" services status "$s" --json 2>/dev/null | grep -q '"running": true'; then
    echo "test.sh: starting $s (bench services up $s)" >&2
    # Redis with appendfsync=always: every acknowledged write is durable, so the Spark protocols'
    # checkpoint barriers (flush) cost nothing extra and the durability tests mean what they say
    opts=(); [ "$s" = redis ] && opts=(--durability always)
    "$VENV/bin/bench" services up "$s" "${opts[@]}"
    started+=("$s")
  fi
done
"$VENV/bin/python" -m pytest "$@"
