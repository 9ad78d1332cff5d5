"""The lossy FUSE file system itself (services/lossyfs): what a power cut keeps and what it drops.

One mount per module (mounting costs a daemon start); each test works in a directory of its own
that it makes durable first, and cuts the power with ``crash()``.  Skipped only where a FUSE mount
cannot be made (no ``/dev/fuse``, no ``fusermount3``, no ``mfusepy``), with that reason.
"""

from __future__ import annotations

import os
import uuid

import pytest

from services import lossyfs

NO_MOUNT = lossyfs.ensure_available(log=lambda _msg: None)

pytestmark = [pytest.mark.lossyfs,
              pytest.mark.skipif(NO_MOUNT is not None, reason=f"no lossy mount here: {NO_MOUNT}")]


@pytest.fixture(scope="module")
def fs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lossyfs")
    with lossyfs.LossyFS.mount(root / "backing", root / "mnt") as mounted:
        yield mounted


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: str, data: bytes, *, sync: bool = False, flags: int = 0) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


@pytest.fixture
def d(fs):
    """A fresh, durable directory on the mount."""
    path = os.path.join(fs.mountpoint, uuid.uuid4().hex[:8])
    os.mkdir(path)
    _fsync(path)
    _fsync(str(fs.mountpoint))
    return path


def test_fsynced_write_survives_and_unsynced_does_not(fs, d):
    _write(f"{d}/a", b"durable", sync=True)
    _fsync(d)
    _write(f"{d}/a", b"-lost", flags=os.O_APPEND)
    _write(f"{d}/b", b"never synced")
    _fsync(d)  # b's entry is durable, its data is not
    _write(f"{d}/c", b"synced data, entry not", sync=True)
    fs.crash()
    assert _read(f"{d}/a") == b"durable"
    assert _read(f"{d}/b") == b""
    assert _read(f"{d}/c") is None


def test_overwrite_rolls_back_to_the_synced_bytes(fs, d):
    _write(f"{d}/f", b"0123456789", sync=True)
    _fsync(d)
    fd = os.open(f"{d}/f", os.O_WRONLY)
    os.pwrite(fd, b"ab", 2)
    os.pwrite(fd, b"XYZW", 1)
    os.close(fd)
    assert _read(f"{d}/f") == b"0XYZW56789"
    fs.crash()
    assert _read(f"{d}/f") == b"0123456789"


def test_rename_needs_a_directory_fsync(fs, d):
    _write(f"{d}/old", b"v1", sync=True)
    _fsync(d)
    _write(f"{d}/tmp", b"v2", sync=True)
    os.rename(f"{d}/tmp", f"{d}/old")
    fs.crash()  # the rename was never made durable: the old file is back
    assert _read(f"{d}/old") == b"v1" and _read(f"{d}/tmp") is None
    _write(f"{d}/tmp", b"v2", sync=True)
    os.rename(f"{d}/tmp", f"{d}/old")
    _fsync(d)
    fs.crash()
    assert _read(f"{d}/old") == b"v2" and _read(f"{d}/tmp") is None


def test_unlink_and_truncate_are_volatile_until_synced(fs, d):
    _write(f"{d}/gone", b"keep me", sync=True)
    _write(f"{d}/short", b"0123456789", sync=True)
    _fsync(d)
    os.unlink(f"{d}/gone")
    os.truncate(f"{d}/short", 3)
    _write(f"{d}/short", b"abc", flags=os.O_APPEND)
    fs.crash()
    assert _read(f"{d}/gone") == b"keep me"
    assert _read(f"{d}/short") == b"0123456789"
    os.unlink(f"{d}/gone")
    os.truncate(f"{d}/short", 3)
    _fsync(f"{d}/short")
    _fsync(d)
    fs.crash()
    assert _read(f"{d}/gone") is None
    assert _read(f"{d}/short") == b"012"


def test_mkdir_and_rmdir_need_the_parent_fsync(fs, d):
    os.mkdir(f"{d}/sub")
    _write(f"{d}/sub/x", b"x", sync=True)
    _fsync(f"{d}/sub")
    fs.crash()  # d was not synced after the mkdir
    assert not os.path.exists(f"{d}/sub")
    os.mkdir(f"{d}/sub")
    _fsync(d)
    os.rmdir(f"{d}/sub")
    fs.crash()
    assert os.path.isdir(f"{d}/sub")


def test_o_dsync_writes_are_durable(fs, d):
    _write(f"{d}/ds", b"dsync", flags=os.O_DSYNC)
    _fsync(d)
    _write(f"{d}/ds", b"+more", flags=os.O_DSYNC | os.O_APPEND)
    fs.crash()
    assert _read(f"{d}/ds") == b"dsync+more"


def test_torn_write_keeps_a_prefix_of_the_last_unsynced_write(fs, d):
    _write(f"{d}/t", b"head", sync=True)
    _fsync(d)
    tail = bytes(range(200))
    _write(f"{d}/t", tail, flags=os.O_APPEND)
    kept = fs.crash(torn=True, seed=7)["torn_bytes_kept"]
    assert 0 < kept < len(tail)
    assert _read(f"{d}/t") == b"head" + tail[:kept]


def test_power_off_fails_io_until_power_on(fs, d):
    _write(f"{d}/p", b"x", sync=True)
    _fsync(d)
    fd = os.open(f"{d}/p", os.O_WRONLY)
    fs.power_off()
    try:
        with pytest.raises(OSError):
            os.write(fd, b"after the cut")
        with pytest.raises(OSError):
            os.listdir(d)
    finally:
        fs.power_on()
    with pytest.raises(OSError):  # a handle from before the cut stays dead
        os.write(fd, b"y")
    os.close(fd)
    assert _read(f"{d}/p") == b"x"


def test_an_armed_cut_goes_off_between_two_fsyncs(fs, d):
    """A cut armed on ``*.meta`` goes off right after the second matching fsync returns to the
    kernel: the .meta file's new bytes are durable, the block file's append after it is not, and
    every call after the cut fails, as on a DataNode cut between its two fsyncs."""
    meta, blk = f"{d}/blk_1.meta", f"{d}/blk_1"
    _write(blk, b"chunk-1", sync=True)
    _write(meta, b"crc-1", sync=True)
    _fsync(d)
    fs.arm("*/blk_*.meta", count=2)
    _write(meta, b"crc-2", sync=True)  # first matching fsync: counted, no cut
    assert not fs.stats()["down"]
    _write(blk, b"chunk-1+2")
    fd = os.open(meta, os.O_WRONLY)
    try:
        os.write(fd, b"crc-3")
        os.fsync(fd)  # the second: durable, then the power goes
        with pytest.raises(OSError):
            os.fsync(os.open(blk, os.O_RDONLY))
    finally:
        os.close(fd)
    stats = fs.stats()
    assert stats["down"] and stats["tripped"] and not stats["armed"]
    assert fs.power_off()["bytes_dropped"] == 2  # the cut already went off: its report (the "+2")
    fs.power_on()
    assert _read(meta) == b"crc-3"
    assert _read(blk) == b"chunk-1"


def test_sync_gate_passes_a_programs_sync_to_the_mount(fs, d):
    """FUSE never sees sync(2); a program run under the sync gate makes the mount durable with it:
    the file written before its ``sync`` survives the cut, the one written after does not."""
    import subprocess
    import sys

    from services.lossyfs.syncgate import supported

    if supported():
        pytest.skip(supported())
    before, after = os.path.join(d, "before"), os.path.join(d, "after")
    script = f"echo one > {before}; sync; echo two > {after}; exit 3"
    done = subprocess.run([sys.executable, "-m", "services.lossyfs", "gate", "--backing",
                           str(fs.backing), "--", "sh", "-c", script],
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr  # the program's own exit status, nothing killed it
    assert fs.stats()["global_syncs"] >= 1
    fs.crash()
    assert _read(before) == b"one\n"
    assert _read(after) is None
