#!/usr/bin/env bash
# The checkpoint store's experiments of docs/results.md (durable writes against the bare fdatasync
# loops, 1 vs 16 threads and indexed_fs vs default_fs, reopen after a clean close and a crash, the
# harness's own ceiling): runs them, saves results/NAME.json and regenerates their tables.
# Extra arguments go to `bench reproduce` (e.g. --quick). Run it on a quiet machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$ROOT/.venv/bin/bench" reproduce store-write store-scaling store-reopen harness "$@"
