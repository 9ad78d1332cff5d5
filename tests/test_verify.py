"""``bench verify`` and :mod:`backends.indexed_fs.verify`: every record's CRC and every snapshot
checked without changing the directory; damaged ranges reported with the keys whose newest
version they held; exit status 1 on damage."""

from __future__ import annotations

import json
import os

import pytest

from backends import StoreLockedError, open_backend
from backends.indexed_fs.segment import segment_name
from backends.indexed_fs.verify import verify_path
from bench.cli import main


def _store(path: str, n: int = 6) -> None:
    """``n`` keys of 100 bytes, one sealed segment each, then a clean close (a snapshot)."""
    with open_backend("indexed_fs", path=path, segment_size=150) as s:
        for i in range(n):
            s.put(f"k{i}", bytes([i]) * 100)


def _flip(path: str, name: str, at: int) -> None:
    with open(os.path.join(path, name), "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))


def _listing(path: str) -> dict[str, int]:
    return {n: os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)}


def test_a_clean_store_verifies(tmp_path, capsys):
    path = str(tmp_path / "s")
    _store(path)
    assert main(["verify", "--backend", "indexed_fs", "--opt", f"path={path}"]) == 0
    out = capsys.readouterr().out
    assert "[VERIFY], Records, 6" in out and "[VERIFY], Result, ok" in out
    assert "[DAMAGED]" not in out


def test_damage_is_located_with_its_keys_and_nothing_is_changed(tmp_path, capsys):
    path = str(tmp_path / "s")
    _store(path)
    _flip(path, segment_name(2), 50)  # a bad CRC in a sealed segment
    os.remove(os.path.join(path, segment_name(3)))  # a missing segment
    os.truncate(os.path.join(path, segment_name(5)), 60)  # a truncated one
    before = _listing(path)
    out_json = str(tmp_path / "v.json")
    rc = main(["verify", "--backend", "indexed_fs", "--opt", f"path={path}", "--json", out_json])
    assert rc == 1
    out = capsys.readouterr().out
    assert "[VERIFY], Result, DAMAGED" in out and "[VERIFY], DamagedKeys, 3" in out
    assert f"segment 2 ({segment_name(2)}), bytes 0-123: record fails its CRC; held 1 " \
           f"key(s): 'k1'" \
        in out
    assert f"segment 3 ({segment_name(3)}), whole file: missing; held 1 key(s): 'k2'" in out
    assert f"segment 5 ({segment_name(5)}), bytes 0-60" in out and "'k4'" in out
    assert _listing(path) == before  # read-only
    doc = json.loads(open(out_json).read())
    assert doc["ok"] is False and doc["damaged_keys"] == ["k1", "k2", "k4"]


def test_a_key_rewritten_after_the_damage_is_not_listed(tmp_path):
    path = str(tmp_path / "s")
    with open_backend("indexed_fs", path=path, segment_size=300) as s:
        s.put("a", b"1" * 100)  # segment 1 holds a and b
        s.put("b", b"2" * 100)
        s.put("c", b"3" * 100)
    _flip(path, segment_name(1), 50)  # inside a's record
    with open_backend("indexed_fs", path=path) as s:  # from the snapshot: segment 1 unread
        s.put("a", b"rewritten")
    rep = verify_path(path)
    assert not rep.ok and [(r.segment, r.start, r.keys) for r in rep.damaged] == [(1, 0, [])]


def test_a_damaged_snapshot_is_reported(tmp_path, capsys):
    path = str(tmp_path / "s")
    _store(path)
    snap = next(n for n in os.listdir(path) if n.endswith(".idx"))
    _flip(path, snap, 30)
    assert main(["verify", "--backend", "indexed_fs", "--opt", f"path={path}"]) == 1
    assert f"[SNAPSHOT-DAMAGED], {snap}: snapshot CRC mismatch" in capsys.readouterr().out


def test_a_torn_tail_of_the_newest_segment_is_a_note_not_damage(tmp_path):
    path = str(tmp_path / "s")
    _store(path)
    newest = max(n for n in os.listdir(path) if n.endswith(".seg"))
    with open(os.path.join(path, newest), "ab") as f:
        f.write(b"\x07" * 30)  # half a header, as a crash mid-append leaves it
    rep = verify_path(path)
    assert rep.ok and any("torn tail" in n for n in rep.notes)


def test_a_store_in_use_is_refused(tmp_path):
    path = str(tmp_path / "s")
    with open_backend("indexed_fs", path=path):
        with pytest.raises(StoreLockedError):
            verify_path(path)


@pytest.mark.parametrize("argv,message", [
    (["--backend", "rocksdb", "--opt", "path=x"], "checks indexed_fs stores"),
    (["--backend", "indexed_fs"], "needs the store's directory"),
    (["--backend", "indexed_fs", "--opt", "path=x", "--opt", "segment_size=1"], "only --opt path"),
    (["--backend", "indexed_fs", "--opt", "path=/nonexistent/store"], "there is no store at"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    """Cannot check (exit 2) is not the same answer as damage found (exit 1)."""
    assert main(["verify", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_directory_without_a_store_cannot_be_checked(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["verify", "--backend", "indexed_fs", "--opt", f"path={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "holds no indexed_fs store" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing created


def test_a_run_on_a_damaged_store_says_so_on_stderr(tmp_path, capsys):
    """Damage found on open is a warning line from bench, not only a counter in stats()."""
    path = str(tmp_path / "s")
    _store(path)
    os.remove(os.path.join(path, segment_name(3)))
    rc = main(["write-heavy", "--backend", "indexed_fs", "--opt", f"path={path}",
               "--opt", "segment_size=150", "--skip-load", "--records", "6", "--ops", "6",
               "--seed", "1", "--no-progress"])
    assert rc == 0
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith("bench: warning:")]
    assert any("segment 3: missing" in line and "bench verify" in line for line in warnings)


def test_hint_files_are_checked(tmp_path, capsys):
    path = str(tmp_path / "s")
    _store(path)
    hints = sorted(n for n in os.listdir(path) if n.endswith(".hint"))
    assert hints  # every sealed segment got one by the close
    assert main(["verify", "--backend", "indexed_fs", "--opt", f"path={path}"]) == 0
    assert f"[VERIFY], Hints, {len(hints)}" in capsys.readouterr().out
    _flip(path, hints[0], 20)
    assert main(["verify", "--backend", "indexed_fs", "--opt", f"path={path}"]) == 1
    out = capsys.readouterr().out
    assert f"[HINT-DAMAGED], {hints[0]}: hint CRC mismatch" in out
    assert "[VERIFY], DamagedRanges, 0" in out  # the records themselves are intact
    for n in os.listdir(path):
        if n.endswith(".idx"):
            os.remove(os.path.join(path, n))
    with open_backend("indexed_fs", path=path) as s:  # the damaged hint's segment is walked
        st = s.stats()
        assert st["hints_used"] == len(hints) - 1 and st["segments_scanned"] == 2
        assert [s.get(f"k{i}") for i in range(6)] == [bytes([i]) * 100 for i in range(6)]
