"""YCSB drop-in: workload files and properties, the record of fields, the exponential
distribution, the threaded load, and ``bench load`` / ``bench run`` end to end."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backends import open_backend
from workloads import core, properties, record, runner
from workloads import generators as g
from workloads.core import WorkloadError
from workloads.runner import ClientSettings

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\[([^\]]+)\], ([^,]+), (-?[0-9.]+(?:[eE][-+]?[0-9]+)?)$")
STATUS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3} \d+ sec: \d+ operations; .*"
                    r"\[READ: Count=\d+, Max=\d+, Min=\d+, Avg=[0-9.]+, 90=\d+, 99=\d+, "
                    r"99.9=\d+, 99.99=\d+\]")


def bench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=300)


def parse(stdout: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        assert m, f"not a YCSB result line: {line!r}"
        out[(m.group(1), m.group(2))] = m.group(3)
    return out


# ---------------------------------------------------------------------------- properties
def test_properties_format_comments_continuations_and_separators():
    props = properties.parse_lines("# c\n! c\nrecordcount = 10\nfieldlength: 7\n"
                                   "readproportion 0.5\nhdrhistogram.percentiles=90,\\\n  99\n")
    assert props == {"recordcount": "10", "fieldlength": "7", "readproportion": "0.5",
                     "hdrhistogram.percentiles": "90,99"}


def test_shipped_files_carry_ycsbs_values():
    expect = {
        "workloada": dict(read=0.5, update=0.5, distribution="zipfian"),
        "workloadb": dict(read=0.95, update=0.05, distribution="zipfian"),
        "workloadc": dict(read=1.0, update=0.0, distribution="zipfian"),
        "workloadd": dict(read=0.95, insert=0.05, distribution="latest"),
        "workloade": dict(scan=0.95, insert=0.05, max_scan_length=100, distribution="zipfian"),
        "workloadf": dict(read=0.5, rmw=0.5, update=0.0, distribution="zipfian"),
    }
    for name, values in expect.items():
        spec = properties.spec_from(properties.read_file(properties.workload_file(name)), name)
        assert (spec.records, spec.operations, spec.field_count, spec.field_length) == \
            (1000, 1000, 10, 100)
        assert spec.read_all_fields and not spec.write_all_fields
        for field, value in values.items():
            assert getattr(spec, field) == value, (name, field)
    heavy = properties.spec_from(properties.read_file(properties.workload_file("write-heavy")))
    assert (heavy.field_count, heavy.value_size, heavy.update) == (0, 1024, 0.9)
    assert properties.workload_file("ycsb-a").name == "workloada"
    with pytest.raises(WorkloadError, match="unknown workload"):
        properties.workload_file("workloadz")


def test_properties_defaults_overrides_and_errors():
    spec = properties.spec_from({"requestdistribution": "exponential", "insertstart": "10",
                                 "insertcount": "20", "recordcount": "50"})
    assert spec.distribution == "exponential" and spec.inserts() == 20
    assert properties.spec_from({}).max_scan_length == 1000  # CoreWorkload's default
    with pytest.raises(WorkloadError, match="not both"):
        properties.spec_from({"valuesize": "10", "fieldcount": "3"})
    with pytest.raises(WorkloadError, match="recordcount"):
        properties.spec_from({"insertstart": "40", "insertcount": "20", "recordcount": "50"})
    with pytest.raises(WorkloadError, match="fieldlength"):
        properties.spec_from({"fieldlength": "ten"})


# ------------------------------------------------------------------------------- records
def test_record_encoding_round_trip_and_one_field_update():
    fields = {"field0": b"a" * 5, "field1": b"", "field2": bytes(range(256))}
    blob = record.encode(fields)
    assert record.decode(blob) == fields
    assert record.decode(blob, "field2") == {"field2": bytes(range(256))}
    assert len(blob) == record.encoded_size(3, 0) + 5 + 256
    updated = record.decode(record.replace_field(blob, "field1", b"new"))
    assert updated == {**fields, "field1": b"new"}
    with pytest.raises(record.RecordError):
        record.decode(b"opaque value")


def test_value_source_generates_in_chunks(monkeypatch):
    monkeypatch.setattr(record.ValueSource, "CHUNK", 1000)  # the path large values take
    src = record.ValueSource(2500, random.Random(1))
    assert len(src._buf) == src.SPAN + 2500 and len(src.next()) == 2500


def test_value_size_above_the_store_limit_is_refused():
    with pytest.raises(WorkloadError, match=str(record.MAX_VALUE_SIZE)):
        core.preset("write-heavy", value_size=record.MAX_VALUE_SIZE + 1)
    with pytest.raises(WorkloadError, match="--load-batch"):
        ClientSettings(load_batch=0).validate()


def test_update_writes_one_field_unless_writeallfields():
    for write_all, changed in ((False, 1), (True, 10)):
        spec = properties.spec_from({"recordcount": "20", "updateproportion": "1",
                                     "readproportion": "0",
                                     "writeallfields": str(write_all).lower()})
        assert spec.update_is_rmw() is not write_all
        workload = core.CoreWorkload(spec, seed=3)
        store = open_backend("memory")
        runner.load(store, workload, batch=1)
        client = workload.client(0)
        for _ in range(5):
            before = {k: record.decode(store.get(k)) for k in workload.load_keys()}
            assert client.do_update(store)[0] == "OK"
            after = {k: record.decode(store.get(k)) for k in before}
            assert sum(before[k][f] != after[k][f] for k in before for f in before[k]) == changed


# ------------------------------------------------------------------- generators and load
def test_exponential_puts_percentile_of_draws_below_the_span():
    gen = g.ExponentialGenerator(90, 100, random.Random(5))
    n = 20_000
    below = sum(gen.next() < 100 for _ in range(n)) / n
    assert abs(below - 0.9) < 5 * math.sqrt(0.9 * 0.1 / n)
    assert abs(g.ExponentialGenerator.from_mean(4.0, random.Random(1)).mean() - 4.0) < 1e-12


def test_threaded_load_inserts_exactly_its_insert_range():
    spec = properties.spec_from({"recordcount": "300", "insertstart": "100",
                                 "insertcount": "150", "valuesize": "8"})
    workload = core.CoreWorkload(spec, seed=1)
    store = open_backend("memory")
    result = runner.load(store, workload, batch=7, threads=3)
    assert result.keys == 150 and store.stats()["keys"] == 150
    assert sorted(k for k, _v in store.scan("user")) == \
        sorted(core.CoreWorkload(spec).key_cache[100:250])


def test_gil_note_only_for_threaded_server_backends():
    from backends import backend_class
    from workloads import parallel

    redis = backend_class("redis")
    assert parallel.gil_note(backend_class("memory"), 8, 1) is None
    assert parallel.gil_note(backend_class("indexed_fs"), 8, 1) is None
    note = parallel.gil_note(redis, 8, 1)
    assert note is not None and "--processes" in note and "from redis" in note
    assert parallel.gil_note(redis, 8, 2) is None and parallel.gil_note(redis, 1, 1) is None


# ---------------------------------------------------------------------------------- CLI
def test_load_then_run_workload_a_and_f(tmp_path):
    store = f"path={tmp_path / 'store'}"
    load = bench("load", "-P", "workloads/ycsb/workloada", "--backend", "indexed_fs", "--opt",
                 store, "-p", "recordcount=300", "-threads", "2", "--no-progress")
    assert load.returncode == 0, load.stderr
    lines = parse(load.stdout)
    assert lines[("INSERT", "Operations")] == "300" and ("OVERALL", "RunTime(ms)") in lines
    assert not any(section.startswith("LOAD-") for section, _m in lines)

    run = bench("run", "-P", "workloads/ycsb/workloada", "--backend", "indexed_fs", "--opt",
                store, "-p", "recordcount=300", "-p", "operationcount=400", "--no-progress",
                "-s", "-p", "status.interval=0.05", "--json", str(tmp_path / "a.json"))
    assert run.returncode == 0, run.stderr
    lines = parse(run.stdout)
    assert ("OVERALL", "Throughput(ops/sec)") in lines
    assert int(lines[("READ", "Operations")]) + int(lines[("UPDATE", "Operations")]) == 400
    assert not any(m == "Return=ERROR" for _s, m in lines)
    assert any(STATUS.match(line) for line in run.stderr.splitlines()), run.stderr
    assert "read-modify-write" in run.stderr  # one field into one blob per key
    doc = json.loads((tmp_path / "a.json").read_text())
    assert re.search(rf"seed {doc['seed']} ", run.stderr)
    assert doc["config"]["update_is_read_modify_write"] is True

    hdr = tmp_path / "hdr"
    f = bench("run", "workloadf", "--backend", "indexed_fs", "--opt", store, "-p",
              "recordcount=300", "-p", "operationcount=300", "--seed", "7", "--no-progress",
              "-p", "hdrhistogram.fileoutput=true", "-p", f"hdrhistogram.output.path={hdr}/",
              "-p", "exporter=site.ycsb.measurements.exporter.JSONArrayMeasurementsExporter")
    assert f.returncode == 0, f.stderr
    rows = {(r["metric"], r["measurement"]): r["value"] for r in json.loads(f.stdout)}
    assert rows[("READ", "Operations")] == 300  # YCSB: the reads inside rmw count too
    assert rows[("UPDATE", "Operations")] == rows[("READ-MODIFY-WRITE", "Operations")]
    from workloads import hdr_v1

    lines = [x for x in (hdr / "READ.hdr").read_text().splitlines() if x[:1].isdigit()]
    assert sum(hdr_v1.decode(x.rsplit(",", 1)[1]).get_total_count() for x in lines) == 300


@pytest.mark.parametrize("args, message", [
    (["run", "workloada", "--backend", "memory", "-p", "workload=site.ycsb.BasicWorkload"],
     "CoreWorkload only"),
    (["load", "workloada", "--backend", "indexed_fs"], "--opt path=DIR"),
    (["load", "--backend", "memory"], "needs a workload"),
    (["load", "workloada", "--backend", "default_fs", "--opt", "path=/tmp/x", "-p", "nokey"],
     "is not key=value"),
    (["write-heavy", "--backend", "memory", "--value-size", str(1 << 32)], "largest value"),
    (["write-heavy", "--backend", "memory", "--load-batch", "0"], "--load-batch"),
])
def test_bad_input_is_one_line(args, message):
    proc = bench(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error: ") and message in err[0], err


@pytest.mark.redis
@pytest.mark.server
def test_redis_keeps_ycsbs_record_as_fields_and_an_update_sends_only_its_field(tmp_path):
    """On a store with records of fields, the load writes each record as fields, a read is one
    HGETALL and an update one HSET of the changed field (no GET, no read-modify-write), as
    YCSB's Redis binding does; dataintegrity checks every read."""
    import uuid

    import services

    services.up(["redis"])
    opts = services.client_options("redis", f"ycsb-fields-{uuid.uuid4().hex[:8]}")
    common = ["--backend", "redis", "--opt", f"host={opts['host']}", "--opt",
              f"port={opts['port']}", "--opt", f"prefix={opts['prefix']}", "-p",
              "recordcount=200", "-p", "dataintegrity=true", "--no-progress"]
    try:
        load = bench("load", "workloada", *common)
        assert load.returncode == 0, load.stderr
        run = bench("run", "workloada", *common, "-p", "operationcount=300", "--json",
                    str(tmp_path / "a.json"))
        assert run.returncode == 0, run.stderr
        lines = parse(run.stdout)
        reads, updates = int(lines[("READ", "Operations")]), int(lines[("UPDATE", "Operations")])
        assert reads + updates == 300 and lines[("VERIFY", "Return=OK")] == str(reads)
        assert "read-modify-write" not in run.stderr
        doc = json.loads((tmp_path / "a.json").read_text())
        assert doc["config"]["fields_in_store"] is True
        assert doc["config"]["update_is_read_modify_write"] is False
        sent = doc["backend_stats"]["ledger_by_phase"]["run"]["requests"]
        assert sent.get("HGETALL") == reads and sent.get("HSET") == updates
        assert "GET" not in sent and "SET" not in sent
        with open_backend("redis", **opts) as store:
            workload = core.CoreWorkload(properties.spec_from(
                {**properties.read_file(properties.workload_file("workloada")),
                 "recordcount": "200", "dataintegrity": "true"}), seed=1)
            key = workload.load_keys()[7]
            assert store.get_fields(key) == workload.client(0).fields_for(key)
            # the other transactions of the field path: read-modify-write, insert, scan
            client = workload.client(0, store)
            assert client.native_fields
            assert client.do_rmw_fields(store)[0] == "OK"
            assert client.do_insert_fields(store)[0] == "OK"
            assert store.get_fields(workload.key(200)) == client.fields_for(workload.key(200))
            assert client.do_scan(store)[0] == "OK"
    finally:
        with open_backend("redis", **opts) as store:
            store.delete_many(store.keys())
