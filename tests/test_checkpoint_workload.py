"""The S4 checkpoint workload: SafeKeeper counts add up, drops appear when the store is slower
than the event rate, and lazy/eager recovery reads back the last acknowledged checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from backends import open_backend
from experiments.storage import recovery
from workloads import checkpoint as ck
from workloads.core import WorkloadError

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def lines(stdout: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in stdout.splitlines():
        section, metric, value = line.split(", ")
        out[(section.strip("[]"), metric)] = value
    return out


def test_word_stream_is_zipfian_and_reproducible():
    spec = ck.CheckpointSpec(events=20_000, pes=1000, seed=3)
    words = ck.word_stream(spec)
    assert words == ck.word_stream(spec)
    assert all(0 <= w < 1000 for w in words)
    top = Counter(words).most_common(1)[0]
    # zipf(0.99) over 1000 items: the top word has ~1/zeta(1000) ~ 13 % of the events
    assert top[0] == 0 and 0.09 < top[1] / len(words) < 0.18
    uniform = Counter(ck.word_stream(ck.CheckpointSpec(events=20_000, pes=1000, skew=0.0)))
    assert max(uniform.values()) / 20_000 < 0.01


def test_counts_add_up_and_last_value_is_the_final_count():
    store = open_backend("memory")
    spec = ck.CheckpointSpec(rate=0, events=3000, pes=50, queue=5000, serialization_queue=5000)
    result = ck.run_checkpoint(store, spec)
    assert result.submitted == 3000
    assert result.written + result.dropped + result.failed == 3000
    assert result.dropped == 0 and result.written == 3000  # the queue holds everything
    assert result.phase.measurements.summary("CHECKPOINT-WRITE")["count"] == 3000
    final = Counter(ck.word_stream(spec))
    for word, n in final.items():
        assert store.get(ck.pe_key(word)) == ck.encode_state(word, n)
        assert result.last_written[ck.pe_key(word)] == ck.encode_state(word, n)


class _SlowStore:
    """A real memory store whose put sleeps: slower than the event rate, so the queue drops."""

    def __init__(self) -> None:
        self.inner = open_backend("memory")

    def put(self, key, value):
        import time
        time.sleep(0.005)
        self.inner.put(key, value)


def test_a_slow_store_drops_oldest_and_failures_are_counted():
    result = ck.run_checkpoint(_SlowStore(), ck.CheckpointSpec(rate=2000, events=400, queue=5))
    assert result.dropped > 0
    assert result.written + result.dropped == 400

    class Failing:
        def put(self, key, value):
            raise OSError("disk on fire")

    bad = ck.run_checkpoint(Failing(), ck.CheckpointSpec(rate=0, events=50, queue=100))
    assert bad.failed == 50 and bad.written == 0
    assert bad.phase.measurements.summary("CHECKPOINT-WRITE-FAILED")["count"] == 50
    assert any("disk on fire" in text for text in bad.phase.errors)


def test_bad_spec_is_clear():
    with pytest.raises(WorkloadError, match="--rate"):
        ck.CheckpointSpec(rate=-1).validate()
    with pytest.raises(WorkloadError, match="--skew"):
        ck.CheckpointSpec(skew=1.5).validate()


@pytest.mark.parametrize("backend", ["default_fs", "indexed_fs"])
@pytest.mark.parametrize("eager", [False, True])
def test_crash_then_recover_reads_last_acknowledged(backend, eager, tmp_path):
    options = {"path": str(tmp_path / "store")}
    spec = ck.CheckpointSpec(rate=0, events=400, pes=100, queue=1000)
    result = recovery.checkpoint_then_crash(backend, options, spec)
    assert result.written == 400
    recovered = recovery.reopen_and_verify(backend, options, result, eager=eager)
    assert recovered.crash and recovered.intact
    verified = recovered.verified
    assert verified.missing == 0 and verified.corrupt == 0
    assert verified.phase.measurements.summary("RECOVERY-READ")["ok"] == len(result.last_written)


def test_cli_checkpoint_lines_and_json(tmp_path):
    out = tmp_path / "c.json"
    proc = bench("checkpoint", "--backend", "indexed_fs", "--rate", "0", "--events", "300",
                 "--pes", "50", "--crash-recover", "--json", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    got = lines(proc.stdout)
    assert got[("CHECKPOINT", "Written")] == "300"
    assert got[("CHECKPOINT", "Dropped")] == "0"
    assert got[("CHECKPOINT", "Failed")] == "0"
    assert got[("CHECKPOINT-WRITE", "Operations")] == "300"
    assert got[("RECOVERY", "Missing")] == "0" and got[("RECOVERY", "Corrupt")] == "0"
    assert ("RECOVERY-READ", "99thPercentileLatency(us)") in got
    doc = json.loads(out.read_text())
    assert doc["workload"] == "checkpoint" and doc["checkpoint"]["written"] == 300


def test_cli_checkpoint_errors_are_one_line():
    proc = bench("checkpoint", "--backend", "memory", "--crash-recover")
    assert proc.returncode == 2 and "persistent backend" in proc.stderr
    proc = bench("checkpoint", "--backend", "memory", "--eager")
    assert proc.returncode == 2 and "--crash-recover" in proc.stderr


def test_a_store_slower_than_the_events_drops_checkpoints_and_keeps_the_last_written(
        tmp_path, slow_sync):
    """A real durable store whose syncs are slow (on purpose, whatever the disk) behind events
    that arrive all at once: checkpoints are dropped, every event is accounted for, and each PE's
    key holds the last checkpoint written for it.  (Which backend drops more at a given rate is
    a throughput comparison: ``bench reproduce checkpoint-drops``.)"""
    with open_backend("indexed_fs", path=str(tmp_path / "s"), durability="sync") as store:
        result = ck.run_checkpoint(store, ck.CheckpointSpec(rate=0, events=400, queue=5, pes=50))
        assert result.dropped > 0 and result.failed == 0
        assert result.written + result.dropped == result.submitted == 400
        assert result.phase.measurements.summary("CHECKPOINT-WRITE")["count"] == result.written
        assert result.last_written
        for key, value in result.last_written.items():
            assert store.get(key) == value
