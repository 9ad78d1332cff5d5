"""``bench verify`` names exactly the keys damage cost: a matrix of byte flips and truncations.

One small store per index variant (no index files; a snapshot; hint files; a snapshot with an
index delta, as a crash leaves it), 18 records of 100-byte values in segments of about five
records, four keys overwritten once.  Each case copies it, damages one record (a flip of one
byte in its CRC, seq, key length, value length, flags, key or value; or a cut through it) in the
newest segment or in a sealed one, of a key's newest version or of an overwritten older one, and
runs verify before anything opens the store again.  Expected:

* the keys reported (lost or rolled back) are exactly the damaged record's key where that record
  was its key's newest version, and nothing else (an older version's loss costs no key);
* ``rolled back`` exactly where an older version of the key is intact;
* a flip inside the key still names the key written: the one damaged byte is found by the CRC;
* the records behind the damaged one all still count as intact (the walk resynchronises);
* the directory is unchanged.
"""

from __future__ import annotations

import os
import shutil

import pytest

from backends import open_backend
from backends.indexed_fs.segment import HEADER, HEADER_SIZE
from backends.indexed_fs.verify import verify_path

VARIANTS = ("log", "snapshot", "hints", "delta")
#: byte offset inside a record (21-byte header, 3-byte key, 100-byte value) per field flipped
FIELDS = {"crc": 1, "seq": 6, "klen": 12, "vlen": 16, "flags": 20, "key": 22, "value": 80}
TARGETS = ("newest-segment", "sealed-newest-version", "sealed-old-version")


def _build(path: str, variant: str) -> None:
    """The store of ``variant`` at ``path`` (see the module notes)."""
    crash = variant == "delta"
    work = path + "-live" if crash else path
    s = open_backend("indexed_fs", path=work, segment_size=700, delta_records=4,
                     index_flush_interval=0, compaction_interval=0)
    for i in range(14):
        s.put(f"k{i:02d}", bytes([i]) * 100)
    for i in range(4):
        s.put(f"k{i:02d}", bytes([100 + i]) * 100)
    if crash:  # a snapshot, two records past it and their delta: a crash image of that state
        s.write_snapshot()
        s.put("k20", b"x" * 100)
        s.put("k21", b"y" * 100)
        assert s.write_delta() is not None
        shutil.copytree(work, path)
    s.close()
    keep = {"log": (), "snapshot": ("snap-",), "hints": (".hint",),
            "delta": ("snap-", "delta-")}[variant]
    for name in os.listdir(path):
        if name.endswith((".idx", ".hint")) and not any(k in name for k in keep):
            os.remove(os.path.join(path, name))


def _records(path: str) -> list[tuple[str, int, str]]:
    """``(segment file, offset, key)`` of every record, in log order."""
    out = []
    for name in sorted(n for n in os.listdir(path) if n.endswith(".seg")):
        data = open(os.path.join(path, name), "rb").read()
        pos = 0
        while pos + HEADER_SIZE <= len(data):
            _c, _seq, klen, vlen, _flags = HEADER.unpack_from(data, pos)
            if klen == 0:
                break  # reserved zeros
            out.append((name, pos, data[pos + HEADER_SIZE: pos + HEADER_SIZE + klen].decode()))
            pos += HEADER_SIZE + klen + vlen
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("verify-damage")
    made = {}
    for variant in VARIANTS:
        _build(str(root / variant), variant)
        made[variant] = str(root / variant)
    return made


def _target(recs: list[tuple[str, int, str]], target: str) -> int:
    """The index in ``recs`` of the record to damage."""
    newest_seg = recs[-1][0]
    last = {key: i for i, (_n, _o, key) in enumerate(recs)}
    if target == "newest-segment":  # with records behind it, so its damage is no torn tail
        return next(i for i, r in enumerate(recs) if r[0] == newest_seg)
    sealed = [i for i, r in enumerate(recs) if r[0] != newest_seg and 0 < i < len(recs) - 1]
    want_newest = target == "sealed-newest-version"
    return next(i for i in sealed if (last[recs[i][2]] == i) == want_newest
                and recs[i - 1][0] == recs[i][0] == recs[i + 1][0])


def _listing(path: str) -> dict[str, bytes]:
    return {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))
            if n != "LOCK"}


def _expect(recs, i: int) -> tuple[list[str], list[str]]:
    """(keys, rolled back keys) for damage to record i."""
    _name, _off, key = recs[i]
    newest = max(j for j, r in enumerate(recs) if r[2] == key) == i
    keys = [key] if newest else []
    older = any(r[2] == key for r in recs[:i])
    return keys, keys if older else []


def _check(path: str, recs, i: int) -> None:
    before = _listing(path)
    rep = verify_path(path)
    keys, rolled = _expect(recs, i)
    assert not rep.ok
    assert rep.damaged_keys == keys, [r.line() for r in rep.damaged]
    assert rep.rolled_back == rolled
    assert not [r for r in rep.damaged if "cannot be read" in r.what], [r.line() for r in rep.damaged]
    assert rep.records == len(recs) - 1  # every other record intact, also those behind it
    assert _listing(path) == before  # read-only


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_flipped_byte_costs_exactly_its_record(stores, tmp_path, variant, target, field):
    path = str(tmp_path / "s")
    shutil.copytree(stores[variant], path)
    recs = _records(path)
    i = _target(recs, target)
    name, off, _key = recs[i]
    with open(os.path.join(path, name), "r+b") as f:
        f.seek(off + FIELDS[field])
        b = f.read(1)[0]
        f.seek(off + FIELDS[field])
        f.write(bytes([b ^ 0xFF]))
    _check(path, recs, i)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_sealed_segment_cut_short_costs_the_keys_cut_off(stores, tmp_path, variant):
    """A sealed segment cut inside a record: that record and the ones after it are gone; the
    keys of those that were newest versions are reported where the log or an index file still
    names them (the cut record's header; hint entries; snapshot and delta entries)."""
    path = str(tmp_path / "s")
    shutil.copytree(stores[variant], path)
    recs = _records(path)
    i = _target(recs, "sealed-newest-version")
    name, off, _key = recs[i]
    os.truncate(os.path.join(path, name), off + 30)
    cut = [j for j, r in enumerate(recs) if r[0] == name and j >= i]
    last = {r[2]: j for j, r in enumerate(recs)}
    newest = sorted(recs[j][2] for j in cut if last[recs[j][2]] == j)
    rep = verify_path(path)
    if variant == "log":  # only the cut record's header is left to name a key
        assert rep.damaged_keys == ([recs[i][2]] if recs[i][2] in newest else [])
    else:
        assert rep.damaged_keys == newest, [r.line() for r in rep.damaged]
    assert rep.records == len(recs) - len(cut)


def test_a_cut_through_the_newest_segment_is_a_torn_tail_unless_an_index_knew_it(stores, tmp_path):
    for variant in VARIANTS:
        path = str(tmp_path / variant)
        shutil.copytree(stores[variant], path)
        recs = _records(path)
        name, off, key = recs[-1]
        os.truncate(os.path.join(path, name), off + 30)
        rep = verify_path(path)
        if variant in ("snapshot", "delta"):  # the index points at the record: it was durable
            assert rep.damaged_keys == [key], [r.line() for r in rep.damaged]
        else:
            assert rep.ok and any("torn tail" in n for n in rep.notes)
