"""``--cpus``: CPU lists, pinning a whole process (threads started later included), and where the
data disk's interrupts land.  Pinning runs in child processes: it must never narrow pytest's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workloads import placement

ROOT = Path(__file__).resolve().parents[1]
INTERRUPTS = """\
           CPU0       CPU1       CPU2
 35:          0          1          0  PCI-MSIX-0000:00:02.0   0-edge      virtio1-config
 36:         10       9000         20  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 38:        500          0          0  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
NMI:          0          0          0   Non-maskable interrupts
"""


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_cpu_lists_parse_like_taskset_and_format_back():
    assert placement.parse_cpus("1", available=[0, 1]) == [1]
    assert placement.parse_cpus("0,2-4", available=list(range(8))) == [0, 2, 3, 4]
    assert placement.format_cpus([0, 2, 3, 4, 7]) == "0,2-4,7"
    assert placement.format_cpus([5]) == "5"


@pytest.mark.parametrize("text", ["x", "1-", "3-1", "-1", ""])
def test_a_malformed_cpu_list_names_the_format(text):
    with pytest.raises(placement.PlacementError, match="expected a CPU list such as 1 or 0,2-3"):
        placement.parse_cpus(text, available=[0, 1])


def test_a_cpu_the_process_may_not_use_names_the_ones_it_may():
    with pytest.raises(placement.PlacementError, match=r"CPU 2-3 is not available .* pick from 0-1"):
        placement.parse_cpus("0,2-3", available=[0, 1])


def test_interrupt_counts_add_up_a_devices_vectors_per_cpu():
    assert placement.interrupt_counts([35, 36], INTERRUPTS) == {0: 10, 1: 9001, 2: 20}
    found = placement.DiskInterrupts("vda", [35, 36], {0: 10, 1: 9001, 2: 20})
    assert found.busiest() == [1]
    assert placement.DiskInterrupts("nvme0n1", [1], {0: 900, 1: 1000, 2: 10}).busiest() == [0, 1]


def test_no_disk_to_ask_about_on_tmpfs_gives_a_clear_error():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    assert placement.disk_interrupts("/dev/shm/not-yet-there") is None
    with pytest.raises(placement.PlacementError, match="cannot tell which CPUs .* --cpus 0"):
        placement.resolve("irq", "/dev/shm/store")
    with pytest.raises(placement.PlacementError, match="no data on a local disk"):
        placement.resolve("irq", None)


def test_a_real_disks_interrupts_are_found(real_disk_dir):
    """Needs a directory on a real disk (the temp dir may be tmpfs): ``real_disk_dir``."""
    found = placement.disk_interrupts(str(real_disk_dir / "store"))
    if found is None:
        pytest.skip(f"{real_disk_dir} is on a disk without interrupts of its own here (overlay)")
    assert found.irqs and found.device
    assert sum(found.per_cpu.values()) > 0 and found.busiest()
    assert placement.resolve("irq", str(real_disk_dir)) == [c for c in found.busiest()
                                                           if c in placement.allowed()]


def test_pin_moves_every_thread_and_the_stores_sync_thread_inherits_it(tmp_path):
    """A thread that exists before pin() moves; one started after (the C committer's sync
    thread, started by a writer on first contention) inherits the CPU set.  Syncs are slow on
    purpose, so the 8 writers do contend on any medium; under a heavy load a round may still
    pass with no writer queued behind a sync, so the writers go on for up to ten rounds until
    the committer has handed a sync to its thread."""
    proc = python(f"""
        import json, os, threading
        from backends import open_backend
        from backends.indexed_fs import group_commit
        from workloads import placement
        group_commit.set_sync_delay(0.005)
        early = threading.Event()
        sleeper = threading.Thread(target=early.wait)
        sleeper.start()
        placement.pin([0])
        store = open_backend("indexed_fs", path={str(tmp_path / 'store')!r})
        def write(i):
            for j in range(200):
                store.put(f"k{{i}}", b"v" * 100)
        for _ in range(10):
            writers = [threading.Thread(target=write, args=(i,)) for i in range(8)]
            for w in writers: w.start()
            for w in writers: w.join()
            if store.stats().get("syncs_by_thread") or not group_commit.native_available:
                break
        tasks = {{}}
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{{tid}}/comm") as f:
                tasks[tid] = (f.read().strip(), sorted(os.sched_getaffinity(int(tid))))
        stats = store.stats()
        early.set(); sleeper.join()
        print(json.dumps({{"tasks": list(tasks.values()), "syncs_by_thread": stats.get("syncs_by_thread"),
                          "stats": {{k: v for k, v in stats.items() if "sync" in k or "commit" in k}}}}))
        store.close()
    """)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert all(cpus == [0] for _, cpus in out["tasks"]), out["tasks"]
    from backends.indexed_fs import group_commit as commit
    if commit.native_available:  # 8 writers contend: the committer hands syncs to its thread
        assert out["syncs_by_thread"] > 0, out["stats"]
        assert "ckptbench-sync" in {name for name, _ in out["tasks"]}


def test_cli_cpus_runs_pinned_says_so_and_records_it(tmp_path):
    out = tmp_path / "r.json"
    proc = bench("write-heavy", "--backend", "indexed_fs", "--records", "50", "--ops", "300",
                 "--threads", "4", "--cpus", "0", "--json", str(out),
                 "--opt", f"path={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stderr
    assert "bench: running on CPU 0 (--cpus 0)" in proc.stderr
    assert proc.stdout.splitlines()[0].startswith("[OVERALL]")  # stdout stays YCSB's
    doc = json.loads(out.read_text())
    assert doc["environment"]["cpus_allowed"] == [0]
    assert doc["config"]["cpus"] == "0" and doc["config"]["cpus_pinned"] == [0]


def test_cli_sweep_pins_every_point(tmp_path):
    out = tmp_path / "s.json"
    proc = bench("sweep", "write-heavy", "--backends", "memory", "--threads-sweep", "1,2",
                 "--point-seconds", "0.3", "--cpus", "0", "--json", str(out),
                 "--plot", str(tmp_path / "s.png"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["environment"]["cpus_allowed"] == [0] and len(doc["results"]) == 2


@pytest.mark.parametrize("args, message", [
    (["--backend", "indexed_fs", "--cpus", "9999"], "CPU 9999 is not available to this process"),
    (["--backend", "indexed_fs", "--cpus", "one"], "expected a CPU list"),
    (["--backend", "redis", "--cpus", "irq"], "keeps no data on a local disk"),
    (["--backend", "indexed_fs", "--cpus", "irq", "--opt", "path=/dev/shm/ckptbench-x"],
     "cannot tell which CPUs"),
])
def test_cli_bad_cpus_is_one_clear_line_before_anything_runs(args, message):
    proc = bench("write-heavy", *args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert proc.stdout == ""
