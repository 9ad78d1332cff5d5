#!/usr/bin/env bash
# The benchmark commands behind the README's figures, in one go (about 13 minutes on 2 cores).
# Each prints its own YCSB-style lines; this script keeps only the lines the README quotes.
# Run it on a quiet machine: every figure is a ratio measured side by side in one invocation.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
B="$ROOT/.venv/bin/bench"
OUT="${1:-$ROOT/results}"
mkdir -p "$OUT"
say() { printf '\n## %s\n$ %s\n' "$1" "${*:2}"; }

say "1 thread, write-only, sync: store vs bare append+fdatasync loop" \
    bench write-heavy --backend indexed_fs --read-proportion 0 --ops 5000 --baseline
"$B" write-heavy --backend indexed_fs --read-proportion 0 --ops 5000 --baseline --no-progress \
  | grep -E '^\[(OVERALL|BASELINE|BASELINE-C)\], (Throughput|Ratio)'

say "16 threads, write-only, sync: store vs 16 bare threads sharing fdatasyncs, in Python (the CPython floor) and in C (the machine's ceiling)" \
    bench write-heavy --backend indexed_fs --read-proportion 0 --threads 16 --ops 16000 --baseline
"$B" write-heavy --backend indexed_fs --read-proportion 0 --threads 16 --ops 16000 --baseline --no-progress \
  | grep -E '^\[(OVERALL|BASELINE|BASELINE-C)\], (Throughput|Ratio)'

say "16 threads, write-only, sync: default_fs vs the same two bare loops (how far 10x default_fs is from the C ceiling)" \
    bench write-heavy --backend default_fs --read-proportion 0 --threads 16 --ops 8000 --baseline
"$B" write-heavy --backend default_fs --read-proportion 0 --threads 16 --ops 8000 --baseline --no-progress \
  | grep -E '^\[(OVERALL|BASELINE|BASELINE-C)\], (Throughput|Ratio)'

say "1 vs 16 threads, indexed_fs vs default_fs, write-only, sync (one invocation)" \
    bench sweep write-heavy --backends indexed_fs,default_fs --read-proportion 0 --threads-sweep 1,16 --rounds 5
"$B" sweep write-heavy --backends indexed_fs,default_fs --read-proportion 0 --threads-sweep 1,16 \
  --rounds 5 --json "$OUT/threads.json" --plot "$OUT/threads.png" 2>&1 | grep -vE '^bench: sweep'

say "the same, with the whole process on the CPUs that take the data disk's interrupts (one layout for 1 and 16 threads)" \
    bench sweep write-heavy --backends indexed_fs,default_fs --read-proportion 0 --threads-sweep 1,16 --rounds 5 --cpus irq
"$B" sweep write-heavy --backends indexed_fs,default_fs --read-proportion 0 --threads-sweep 1,16 \
  --rounds 5 --cpus irq --json "$OUT/threads-irq.json" --plot "$OUT/threads-irq.png" 2>&1 \
  | grep -vE '^bench: sweep'

say "index rebuild, 10^6 keys, 40-byte values: clean close, then crash (full scan)" \
    bench recovery --backend indexed_fs --records 1000000 --value-size 40 --durability none [--crash]
"$B" recovery --backend indexed_fs --records 1000000 --value-size 40 --durability none --no-progress \
  | grep -E '^\[RECOVERY\], (OpenTime|Missing|Corrupt)'
"$B" recovery --backend indexed_fs --records 1000000 --value-size 40 --durability none --crash --no-progress \
  | grep -E '^\[RECOVERY\], (OpenTime|Missing|Corrupt)'

say "harness overhead: memory backend, 1 and 2 processes" \
    bench write-heavy --backend memory --read-proportion 0 --ops 300000 [--processes 2 --ops 600000]
"$B" write-heavy --backend memory --read-proportion 0 --ops 300000 --no-progress | grep -E '^\[OVERALL\], Throughput'
"$B" write-heavy --backend memory --read-proportion 0 --ops 600000 --processes 2 --no-progress | grep -E '^\[OVERALL\], Throughput'

if "$B" services status redis --json 2>/dev/null | grep -q '"running": true'; then
  for cp in "1 1" "4 1" "2 16" "2 64"; do
    set -- $cp
    say "Redis backend vs redis-benchmark, $1 connection(s), pipeline $2, median of 3 rounds" \
        bench peer redis --clients $1 --pipeline $2 --rounds 3 --ops 100000
    "$B" peer redis --clients "$1" --pipeline "$2" --rounds 3 --ops 100000 | grep -E 'Ratio'
  done
else
  echo "(redis not running: bench services up redis, then rerun for the peer figures)"
fi
