#!/usr/bin/env bash
# The whole test suite against real servers: install and start what the tests need (idempotent,
# cached in the usual user caches), run pytest, stop the servers this script started.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
export PATH="$VENV/bin:$PATH"
export CKPTBENCH_STATE="${CKPTBENCH_STATE:-$ROOT/.state}"

# hdfs before hbase: HBase started while HDFS runs puts its root and WAL on it
SERVERS="${CKPTBENCH_TEST_SERVERS:-redis hdfs hbase minio nfs}"
started=()
cleanup() {
  # in reverse start order: HBase stops (flushing to HDFS) before HDFS does
  local i
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do
    "$VENV/bin/bench" services down "${started[$i]}" >/dev/null 2>&1 || true
  done
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
