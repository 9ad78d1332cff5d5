"""spark.ckptbench.* validation, the deterministic source and the ground truth (pure logic, no Spark)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from backends.base import BadOptionError, UnknownBackendError
from spark_integration.conf import PREFIX, Settings, SparkIntegrationError, build, from_conf, to_conf
from spark_integration.operators import KeyedState, decode_pairs, encode_pairs
from spark_integration.source import generate
from spark_integration.verify import compare, count_truth


def conf(**kv):
    return {PREFIX + k: str(v) for k, v in kv.items()}


def test_defaults_to_no_protocol_without_backend():
    s = from_conf({})
    assert s.protocol == "none" and s.backend is None and s.interval == 1
    assert s.job_id and s.state_dir


def test_full_settings_parse_and_pickle(tmp_path):
    c = conf(protocol="coordinated", backend="default_fs", interval="3", fullEvery="5",
             jobId="j1", failAt="900, 100", failInstance="1")
    c[PREFIX + "backend.path"] = str(tmp_path)
    s = from_conf(c)
    assert (s.protocol, s.backend, s.interval, s.full_every, s.job_id) == ("coordinated", "default_fs", 3, 5, "j1")
    assert s.backend_options == {"path": str(tmp_path)}
    assert s.fail_at == (100, 900) and s.fail_instance == 1
    assert pickle.loads(pickle.dumps(s)) == s


def test_build_takes_typed_values_and_matches_the_conf(tmp_path):
    typed = build("coordinated", "default_fs", {"path": str(tmp_path)}, interval=3, full_every=5,
                  job_id="j1", state_dir=str(tmp_path / "w"), fail_at=[900, 100], fail_instance=1)
    c = conf(protocol="coordinated", backend="default_fs", interval="3", fullEvery="5", jobId="j1",
             stateDir=str(tmp_path / "w"), failAt="900,100", failInstance="1")
    c[PREFIX + "backend.path"] = str(tmp_path)
    assert typed == from_conf(c)


@pytest.mark.parametrize("kwargs, named", [
    (dict(interval=0), "interval=0"), (dict(jitter=-1), "jitter=-1"), (dict(full_every=0), "fullEvery=0"),
    (dict(fail_at=[-5]), "failAt=-5"), (dict(fail_instance=-1), "failInstance=-1"),
    (dict(interval=2, jitter=1), "jitter=1"),
])
def test_build_refuses_what_from_conf_refuses(tmp_path, kwargs, named):
    with pytest.raises(SparkIntegrationError, match=named):
        build("coordinated", "default_fs", {"path": str(tmp_path)}, **kwargs)


def test_reads_a_real_sparkconf_like_object():
    class FakeConf:  # SparkConf's one method we use; pure-logic test
        def getAll(self):
            return [("spark.master", "local[2]"), (PREFIX + "protocol", "none")]

    assert from_conf(FakeConf()).protocol == "none"


@pytest.mark.parametrize(
    "entries, message",
    [
        (conf(protocol="sometimes"), "valid protocols: none, uncoordinated, coordinated, cic, logio"),
        (conf(protocl="none"), "unknown Spark conf key 'spark.ckptbench.protocl'"),
        (conf(protocol="coordinated"), "spark.ckptbench.backend is not set"),
        (conf(protocol="coordinated", backend="memory"), "separate Python workers"),
        (conf(interval="0"), "spark.ckptbench.interval=0 must be >= 1"),
        (conf(interval="often"), "spark.ckptbench.interval='often' is not an integer"),
        (conf(failAt="x"), "spark.ckptbench.failAt='x' is not an integer"),
        (conf(interval="2", jitter="1"),
         "spark.ckptbench.jitter=1 must be below half of spark.ckptbench.interval=2"),
        ({PREFIX + "backend.path": "/tmp"}, "spark.ckptbench.backend is not"),
    ],
)
def test_bad_settings_name_the_key_and_valid_values(entries, message):
    with pytest.raises(SparkIntegrationError, match=message.replace("(", r"\(").replace(".", r"\.")):
        from_conf(entries)


def test_unknown_backend_lists_valid_ones():
    with pytest.raises(UnknownBackendError, match="valid backends:.*memory"):
        from_conf(conf(protocol="coordinated", backend="floppy"))


def test_backend_options_validated_by_the_backend(tmp_path):
    c = conf(protocol="coordinated", backend="default_fs")
    c[PREFIX + "backend.colour"] = "blue"
    with pytest.raises(BadOptionError, match="no option 'colour'"):
        from_conf(c)


@pytest.mark.parametrize("url", ["hdfs://10.77.0.1:8020/ckptbench/j?webhdfs=9870",
                                 "nfs://127.0.0.1/export/j?version=3"])
def test_a_remote_path_stays_a_url(url):
    """A directory ``path`` is made absolute; an ``hdfs://`` or ``nfs://`` URL is no directory."""
    c = conf(protocol="coordinated", backend="indexed_fs")
    c[PREFIX + "backend.path"] = url
    assert from_conf(c).backend_options["path"] == url


def test_to_conf_round_trip(tmp_path):
    entries = to_conf({"protocol": "coordinated", "backend": "default_fs", "interval": 2}, {"path": str(tmp_path)})
    s = from_conf(entries)
    assert s.interval == 2 and s.backend_options["path"] == str(tmp_path)


# ---------------------------------------------------------------------------- the source
def test_events_are_a_pure_function_of_seed_and_offset():
    whole = generate("bids", 7, 1000, 1.1, 0, 5000)
    part = generate("bids", 7, 1000, 1.1, 3000, 5000)
    for col in ("seq", "key", "bidder", "price"):
        assert np.array_equal(whole[col][3000:], part[col])
    other = generate("bids", 8, 1000, 1.1, 0, 5000)
    assert not np.array_equal(whole["key"], other["key"])


def test_zipf_keys_are_skewed_and_in_range():
    keys = generate("wordcount", 1, 10_000, 1.0, 0, 200_000)["key"]
    assert keys.min() >= 0 and keys.max() < 10_000
    counts = np.bincount(keys, minlength=10_000)
    assert counts[0] > 20 * counts[5000] + 1  # rank 1 is far hotter than rank 5001
    uniform = np.bincount(generate("wordcount", 1, 100, 0.0, 0, 100_000)["key"], minlength=100)
    assert uniform.min() > 800


def test_ground_truth_and_compare():
    truth = count_truth("wordcount", 3, 50, 1.0, 10_000, chunk=999)
    assert truth.sum() == 10_000
    keys = np.flatnonzero(truth)
    assert compare(truth, keys, truth[keys]).exactly_once
    bad = truth[keys].copy()
    bad[0] += 1
    result = compare(truth, keys, bad)
    assert not result.exactly_once and result.wrong_keys == 1 and "NOT exactly-once" in result.describe()


# ------------------------------------------------------------------------ operator state
def test_keyed_state_counts_tracks_dirty_and_round_trips():
    s = KeyedState()
    s.apply(np.array([1, 1, 5000]))
    assert s.counts[1] == 2 and s.counts[5000] == 1
    keys, vals = s.items(only_dirty=True)
    assert keys.tolist() == [1, 5000] and vals.tolist() == [2, 1]
    s.dirty[:] = False
    s.apply(np.array([2]))
    assert s.items(only_dirty=True)[0].tolist() == [2]
    s.version = 9
    k, v = decode_pairs(encode_pairs(*s.items()))
    r = KeyedState()
    r.set(k, v)
    assert r.items()[0].tolist() == [1, 2, 5000]


def test_settings_is_plain_data():
    assert Settings().writes_checkpoints is False


def test_cold_restore_is_a_true_or_false_conf_entry():
    conf = {PREFIX + "protocol": "coordinated", PREFIX + "backend": "redis"}
    assert from_conf(conf).cold_restore is False
    assert from_conf({**conf, PREFIX + "coldRestore": "TRUE"}).cold_restore is True
    with pytest.raises(SparkIntegrationError, match="coldRestore='yes' is not valid; give true or false"):
        from_conf({**conf, PREFIX + "coldRestore": "yes"})


def test_a_cold_restore_says_why_when_the_cache_cannot_be_dropped(tmp_path):
    """Local directories are evicted file by file; a memory file system and a server cannot be
    made cold, and the run says so instead of passing a warm restore off as cold."""
    from backends.media.local import LocalMedium
    from spark_integration.store import evict_job

    disk = LocalMedium(str(tmp_path / "d"), "t")
    disk.write_atomic("f", b"x" * 8192)
    assert disk.evict() is None
    shm = LocalMedium(f"/dev/shm/ckptbench-evict-{tmp_path.name}", "t")
    try:
        assert "memory file system" in shm.evict()
    finally:
        import shutil

        shutil.rmtree(shm.root, ignore_errors=True)
    server = build("coordinated", "redis")
    assert evict_job(server).startswith("warm: redis keeps its data")


def test_a_store_failure_in_an_executor_becomes_one_line():
    """Spark wraps an executor's typed store error in its own exception with the whole Python
    traceback; the runner reports its last line and what to do, and nothing else."""
    from spark_integration.errors import store_error

    spark_text = ("An exception was thrown from the Python worker:\nTraceback (most recent call "
                  "last):\n  File \"x.py\", line 1, in put\nbackends.base.StorageFullError: redis "
                  "at 127.0.0.1:6379: OOM command not allowed when used memory > 'maxmemory'.\n")
    err = store_error(RuntimeError(spark_text))
    assert isinstance(err, SparkIntegrationError) and "\n" not in str(err)
    assert str(err).startswith("the checkpoint store failed (StorageFullError): redis at "
                               "127.0.0.1:6379: OOM command not allowed")
    assert "maxmemory" in str(err) and "--state-bytes" in str(err)
    assert store_error(RuntimeError("Python worker exited unexpectedly")) is None
