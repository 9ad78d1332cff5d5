"""The interface contract, checked on every registered backend (later backends join by registering)."""

from __future__ import annotations

import threading

import pytest

from backends import (BadOptionError, NoFieldsError, RecordModelError, StoreClosedError,
                      backend_class)

ODD_KEYS = ["a/b", "a b", "ä-ü-ß", "x*y?[z]", "100%", "..", "~tilde", "k" * 300, "line\nbreak"]


def test_put_get_roundtrip(store):
    store.put("pe-1", b"state-1")
    assert store.get("pe-1") == b"state-1"


def test_latest_write_wins(store):
    for i in range(5):
        store.put("pe", f"v{i}".encode())
    assert store.get("pe") == b"v4"


def test_missing_key_is_none(store):
    assert store.get("nope") is None


def test_delete(store):
    store.put("k", b"v")
    store.delete("k")
    assert store.get("k") is None
    store.delete("k")  # absent: no error
    store.delete("never-there")


def test_empty_and_large_values(store):
    big = bytes(range(256)) * 4096  # 1 MiB
    store.put("empty", b"")
    store.put("big", big)
    assert store.get("empty") == b""
    assert store.get("big") == big


def test_bytearray_and_memoryview_values_are_stored_as_bytes(store):
    store.put("ba", bytearray(b"abc"))
    store.put("mv", memoryview(b"def"))
    assert store.get("ba") == b"abc"
    assert store.get("mv") == b"def"


@pytest.mark.parametrize("key", ODD_KEYS, ids=range(len(ODD_KEYS)))
def test_odd_keys_roundtrip_and_scan(store, key):
    store.put(key, key.encode())
    assert store.get(key) == key.encode()
    assert list(store.scan(key)) == [(key, key.encode())]


def test_put_many_get_many(store):
    items = {f"k{i:03d}": f"v{i}".encode() for i in range(50)}
    store.put_many(items)
    store.put_many([("k000", b"new")])
    got = store.get_many(list(items) + ["absent"])
    assert "absent" not in got
    assert got["k000"] == b"new"
    assert all(got[k] == v for k, v in items.items() if k != "k000")
    store.put_many([])
    assert store.get_many([]) == {}


def test_delete_many(store):
    items = {f"d{i:03d}": f"v{i}".encode() for i in range(40)}
    store.put_many(items)
    gone = [f"d{i:03d}" for i in range(0, 40, 2)]
    store.delete_many(gone + ["absent", gone[0]])  # absent and repeated keys: no error
    got = store.get_many(list(items))
    assert sorted(got) == sorted(set(items) - set(gone))
    assert [k for k, _ in store.scan("d")] == sorted(set(items) - set(gone))
    store.delete_many([])
    store.delete_many(iter(sorted(got)))
    assert store.get_many(list(items)) == {}


def test_delete_many_across_batch_limits(store, monkeypatch):
    """Above the backend's batch limits the keys go as several calls, every one deleted."""
    monkeypatch.setattr(type(store), "max_batch_items", 7)
    keys = [f"b{i:03d}" for i in range(30)]
    store.put_many([(k, b"x") for k in keys])
    store.delete_many(keys[:25])
    assert sorted(store.get_many(keys)) == keys[25:]


def test_delete_many_checks_every_key_first(store):
    store.put("kept", b"v")
    with pytest.raises((TypeError, ValueError)):
        store.delete_many(["kept", b"bytes-key"])
    assert store.get("kept") == b"v"  # nothing deleted


def test_scan_prefix_is_ordered_and_exact(store):
    keys = ["b2", "a1", "b10", "b1", "c", "b", "ba"]
    for k in keys:
        store.put(k, k.encode())
    store.delete("b10")
    assert [k for k, _ in store.scan("b")] == ["b", "b1", "b2", "ba"]
    assert [v for _, v in store.scan("b1")] == [b"b1"]
    assert [k for k, _ in store.scan("")] == sorted(set(keys) - {"b10"})
    assert list(store.scan("zzz")) == []


def test_keys_are_the_scans_keys_without_the_values(store):
    """``keys(prefix)``: what deleting a job's namespace lists (SCAN, ListObjectsV2, a
    key-only HBase scan, the keydir, or the scan itself): the same keys as ``scan``, ordered."""
    for k in ["b2", "a1", "b10", "b1", "c", "b", "ba"]:
        store.put(k, k.encode())
    store.delete("b10")
    assert store.keys("b") == ["b", "b1", "b2", "ba"] == [k for k, _ in store.scan("b")]
    assert store.keys("") == [k for k, _ in store.scan("")] and store.keys("zzz") == []
    with pytest.raises(TypeError):
        store.keys(b"b")


def test_type_errors(store):
    with pytest.raises(TypeError):
        store.put(b"bytes-key", b"v")
    with pytest.raises(TypeError):
        store.put("k", "str-value")
    with pytest.raises(ValueError):
        store.put("", b"v")


def test_closed_store_raises_and_close_is_idempotent(store):
    store.put("k", b"v")
    store.close()
    store.close()
    assert store.closed
    for op in (lambda: store.get("k"), lambda: store.put("k", b"v"), lambda: list(store.scan(""))):
        with pytest.raises(StoreClosedError):
            op()


def test_context_manager_closes(store_factory):
    with store_factory() as s:
        s.put("k", b"v")
    assert s.closed


def test_stats_names_backend_and_durability(store, backend_name):
    store.put("k", b"v")
    stats = store.stats()
    assert stats["backend"] == backend_name
    assert stats["durability"] in backend_class(backend_name).durability_modes


def test_flush(store):
    store.put("k", b"v")
    store.flush()
    assert store.get("k") == b"v"


def test_every_declared_durability_mode_opens(store_factory, backend_name):
    for mode in backend_class(backend_name).durability_modes:
        with store_factory(durability=mode) as s:
            s.put(f"d-{mode}", b"x")
            assert s.get(f"d-{mode}") == b"x"
            assert s.stats()["durability"] == mode


def test_unknown_durability_and_option_are_clear_errors(store_factory, backend_name):
    with pytest.raises(BadOptionError, match="durability"):
        store_factory(durability="bogus-mode")
    with pytest.raises(BadOptionError, match="valid options"):
        store_factory(no_such_option=1)


def test_data_survives_reopen(store_factory, backend_name):
    if not backend_class(backend_name).persistent:
        pytest.skip(f"{backend_name} keeps nothing after close by design")
    s = store_factory()
    s.put_many({f"r{i}": f"v{i}".encode() for i in range(100)})
    s.put("r7", b"latest")
    s.delete("r8")
    s.close()
    with store_factory() as s2:
        assert s2.get("r7") == b"latest"
        assert s2.get("r8") is None
        assert s2.get("r99") == b"v99"
        assert len(list(s2.scan("r"))) == 99


def test_concurrent_writers(store):
    errors = []

    def writer(t):
        try:
            for i in range(40):
                store.put(f"t{t}-{i:02d}", f"{t}:{i}".encode())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for t in range(8):
        assert [v for _, v in store.scan(f"t{t}-")] == [f"{t}:{i}".encode() for i in range(40)]


# ---------------------------------------------------------------- records of fields (some stores)
def _fields_store(store):
    """The store when it keeps records of fields; otherwise check that every field operation
    is refused with the typed error, nothing written, and skip the rest of the test."""
    if store.record_fields:
        return store
    for op in (lambda: store.put_fields("r", {"f": b"v"}), lambda: store.get_fields("r"),
               lambda: store.put_fields_many([("r", {"f": b"v"})]),
               lambda: store.scan_fields("")):
        with pytest.raises(NoFieldsError, match="one value per key"):
            op()
    assert store.get("r") is None
    pytest.skip(f"{store.name} keeps one value per key (record_fields is false)")


def test_fields_roundtrip_and_one_field_update(store):
    s = _fields_store(store)
    s.put_fields("rec", {"field0": b"a" * 100, "field1": b"b" * 100, "fi\u00e9ld": b""})
    s.put_fields("rec", {"field1": b"B"})  # one field: the others are kept
    assert s.get_fields("rec") == {"field0": b"a" * 100, "field1": b"B", "fi\u00e9ld": b""}
    assert s.get_fields("rec", ["field1", "absent"]) == {"field1": b"B"}
    assert s.get_fields("rec", ["absent"]) is None and s.get_fields("no-record") is None
    s.put_fields("new", {"f": bytearray(b"x")})  # no record yet: created
    assert s.get_fields("new") == {"f": b"x"}
    s.put_fields_many([("solo", {"f": b"1"})])  # a batch of one
    assert list(s.scan_fields("solo")) == [("solo", {"f": b"1"})]
    s.delete("rec")
    assert s.get_fields("rec") is None


def test_fields_many_and_scan_leave_the_other_model_out(store):
    s = _fields_store(store)
    s.put_fields_many([(f"r{i:02d}", {"n": str(i).encode(), "m": b"-"}) for i in range(30)]
                      + [("r05", {"n": b"last"})])
    s.put("r99", b"a value, not a record")
    records = list(s.scan_fields("r"))
    assert [k for k, _ in records] == [f"r{i:02d}" for i in range(30)]
    assert records[5][1] == {"n": b"last", "m": b"-"}
    assert list(s.scan("r")) == [("r99", b"a value, not a record")]
    assert s.keys("r") == [f"r{i:02d}" for i in range(30)] + ["r99"]
    with pytest.raises(RecordModelError, match="other record model"):
        s.get("r01")
    with pytest.raises(RecordModelError, match="other record model"):
        s.get_fields("r99")
    assert s.get("r99") == b"a value, not a record"  # nothing changed by the refusals


def test_fields_bad_input_is_refused_before_anything_is_written(store):
    s = _fields_store(store)
    for bad, error in (({}, ValueError), ({"": b"v"}, TypeError), ({b"f": b"v"}, TypeError),
                       ({"f": "str"}, TypeError), ([("f", b"v")], TypeError)):
        with pytest.raises(error):
            s.put_fields("bad", bad)
    with pytest.raises(TypeError):
        s.put_fields_many([("bad", {"f": b"v"}), ("bad2", {"f": 1})])
    with pytest.raises(ValueError):
        s.get_fields("bad", [])
    assert s.get_fields("bad") is None and s.keys("bad") == []
    s.close()
    with pytest.raises(StoreClosedError):
        s.get_fields("bad")
    with pytest.raises(StoreClosedError):
        s.put_fields("bad", {"f": b"v"})
