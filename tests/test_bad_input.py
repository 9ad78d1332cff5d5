"""Bad input gets one clear message naming the problem and the fix, and leaves stored data intact."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from backends import (
    BackendUnavailableError,
    BadOptionError,
    CorruptDataError,
    StorageFullError,
    StoreLockedError,
    UnknownBackendError,
    open_backend,
)

FILE_BACKENDS = ["default_fs", "indexed_fs"]


def test_unknown_backend_lists_valid_ones():
    with pytest.raises(UnknownBackendError) as err:
        open_backend("casandra")
    assert "casandra" in str(err.value)
    for name in ("indexed_fs", "default_fs", "memory", "redis"):
        assert name in str(err.value)


def test_unknown_option_lists_valid_ones(tmp_path):
    with pytest.raises(BadOptionError) as err:
        open_backend("default_fs", path=str(tmp_path), pth="x")
    assert "'pth'" in str(err.value) and "path" in str(err.value)


def test_bad_option_type_is_named(tmp_path):
    with pytest.raises(BadOptionError, match="durability"):
        open_backend("default_fs", path=str(tmp_path), durability="always")


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_missing_path_says_how(name):
    with pytest.raises(BadOptionError, match="path=DIR"):
        open_backend(name)


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_unwritable_path(name, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(BackendUnavailableError, match="path=DIR"):
        open_backend(name, path=str(blocker / "store"))
    assert blocker.read_bytes() == b"not a directory"


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_directory_locked_by_another_process(name, tmp_path):
    path = str(tmp_path / "store")
    with open_backend(name, path=path) as store:
        store.put("k", b"v")
        store.flush()
        code = (
            "import sys\n"
            "from backends import open_backend, StoreLockedError\n"
            f"try:\n    open_backend({name!r}, path={path!r})\n"
            "except StoreLockedError as e:\n    print(e); sys.exit(3)\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 3, proc.stderr
        assert "locked by another process" in proc.stdout and str(os.getpid()) in proc.stdout
        with pytest.raises(StoreLockedError):
            open_backend(name, path=path)  # a second opener in the same process too
        assert store.get("k") == b"v"
    with open_backend(name, path=path) as again:  # released on close
        assert again.get("k") == b"v"


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_full_disk(name, small_tmpfs):
    path = str(small_tmpfs / "store")
    # indexed_fs preallocates nothing, but keep its segments small so the disk fills mid-segment
    extra = {"segment_size": 256 * 1024} if name == "indexed_fs" else {}
    acked = {}
    with open_backend(name, path=path, **extra) as store:
        with pytest.raises(StorageFullError) as err:
            for i in range(10_000):
                value = os.urandom(8 * 1024)
                store.put(f"k{i:05d}", value)
                acked[f"k{i:05d}"] = value
        assert "no space left" in str(err.value)
        assert len(acked) > 10
        for key, value in acked.items():  # still readable right after the failure
            assert store.get(key) == value
    # free some space by removing an unrelated file? there is none: reopen must work on a full disk
    with open_backend(name, path=path, **extra) as store:
        for key, value in acked.items():
            assert store.get(key) == value


def test_default_fs_corrupt_file_is_detected_not_returned(tmp_path):
    path = tmp_path / "store"
    with open_backend("default_fs", path=str(path)) as store:
        store.put("pe-1", b"A" * 100)
        store.put("pe-2", b"B" * 100)
    victim = path / "pe-1.ckpt"
    blob = bytearray(victim.read_bytes())
    blob[-10] ^= 0xFF
    victim.write_bytes(bytes(blob))
    with open_backend("default_fs", path=str(path)) as store:
        with pytest.raises(CorruptDataError, match="pe-1"):
            store.get("pe-1")
        assert store.get("pe-2") == b"B" * 100
    (path / "pe-2.ckpt").write_bytes((path / "pe-2.ckpt").read_bytes()[:7])  # torn
    with open_backend("default_fs", path=str(path)) as store:
        with pytest.raises(CorruptDataError):
            store.get("pe-2")


def test_default_fs_drops_leftover_temp_files(tmp_path):
    path = tmp_path / "store"
    with open_backend("default_fs", path=str(path)) as store:
        store.put("k", b"v")
    (path / f".tmp-999-{uuid.uuid4().hex}").write_bytes(b"half a checkpoint")
    with open_backend("default_fs", path=str(path)) as store:
        assert store.stats()["leftover_temp_files_removed"] == 1
        assert [k for k, _ in store.scan("")] == ["k"]


def _nfs_dir() -> str:
    import services

    services.up(["nfs"])
    return services.client_options("nfs", f"bad{uuid.uuid4().hex[:10]}")["path"]


@pytest.mark.server
@pytest.mark.nfs
@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_corrupt_data_over_nfs_is_detected_not_returned(name):
    from backends.indexed_fs.segment import segment_name
    from backends.media import open_medium

    path = _nfs_dir()
    with open_backend(name, path=path) as store:
        store.put("pe-1", b"A" * 100)
        store.put("pe-2", b"B" * 100)
    with open_medium(path, "test") as medium:
        victim = "pe-1.ckpt" if name == "default_fs" else segment_name(1)
        blob = bytearray(medium.read_file(victim))
        blob[50 if name == "indexed_fs" else -10] ^= 0xFF  # indexed_fs: inside pe-1's value
        medium.write_atomic(victim, bytes(blob))
    with open_backend(name, path=path) as store:
        with pytest.raises(CorruptDataError, match="pe-1"):
            store.get("pe-1")
        assert store.get("pe-2") == b"B" * 100


@pytest.mark.server
@pytest.mark.nfs
@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_unreachable_nfs_server_is_a_clear_error(name):
    url = "nfs://127.0.0.1/nowhere?version=3&nfsport=1&mountport=1&timeout=2"
    with pytest.raises(BackendUnavailableError, match="bench services up nfs"):
        open_backend(name, path=url)


# ---------------------------------------------------------------- the command line, as a user meets it
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ("--backend", "memory", "--records", "5", "--ops", "5", "--no-progress")


def _bench(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd or ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The single ``bench: error:`` line of a failed command (asserting there is nothing else)."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: "), proc.stderr
    return lines[0]


@pytest.fixture
def filled_store(tmp_path):
    """An indexed_fs store holding one key: bad input aimed at it must leave it as it is."""
    path = tmp_path / "store"
    with open_backend("indexed_fs", path=str(path)) as store:
        store.put("kept", b"intact")
    yield path
    with open_backend("indexed_fs", path=str(path)) as store:
        assert store.get("kept") == b"intact"


@pytest.mark.parametrize("opt, allowed", [
    ("index_flush_interval=inf", "finite number"),
    ("index_flush_interval=1e10", "<= 604800"),
    ("index_flush_interval=nan", "finite number"),
    ("compaction_interval=inf", "finite number"),
    ("path=", "non-empty"),
])
def test_timer_option_out_of_range_or_empty_path_is_one_line(opt, allowed, filled_store):
    extra = () if opt.startswith("path=") else ("--opt", f"path={filled_store}")
    proc = _bench("write-heavy", "--backend", "indexed_fs", *extra, "--opt", opt,
                  "--records", "5", "--ops", "5", "--no-progress")
    line = _one_line_error(proc)
    assert opt.split("=")[0] in line and allowed in line and "--opt" in line
    assert "[OVERALL]" not in proc.stdout


# (command line, option under test); every command that writes files, tiny and server-free
OUTPUT_COMMANDS = [
    (("write-heavy", *TINY), "--json"),
    (("write-heavy", *TINY), "--csv"),
    (("ycsb-a", *TINY), "--json"),
    (("compare", "write-heavy", "--backends", "memory", "--records", "5", "--ops", "5"), "--json"),
    (("compare", "write-heavy", "--backends", "memory", "--records", "5", "--ops", "5"), "--csv"),
    (("compare", "write-heavy", "--backends", "memory", "--records", "5", "--ops", "5"), "--plot"),
    (("sweep", "write-heavy", "--backends", "memory", "--records", "5", "--point-seconds", "0.1",
      "--targets", "100"), "--json"),
    (("report", "x.json"), "--plot"),
    (("report", "x.json"), "--html"),
    (("report", "x.json"), "--csv"),
    (("diff", "x.json", "y.json"), "--json"),
    (("write-heavy", *TINY), "--html"),
    (("recovery", *TINY[:2], "--records", "5", "--no-progress"), "--json"),
    (("checkpoint", *TINY[:2], "--events", "5", "--no-progress"), "--json"),
    (("peer", "redis", "--ops", "5"), "--json"),
    (("spark", "--protocol", "none", "--events", "5"), "--json"),
    (("spark-matrix", "--events", "5"), "--png"),
    (("mst", "--backend", "indexed_fs"), "--json"),
    (("state-sweep", "--stores", "indexed_fs", "--sizes", "1MiB,2MiB"), "--json"),
    (("state-sweep", "--stores", "indexed_fs", "--sizes", "1MiB,2MiB"), "--plot"),
    (("storage-compare", "--media", "local", "--ops", "5"), "--plot"),
    (("thesis", "table5.2"), "--out"),
    (("reproduce", "--all", "--quick"), "--out"),
]


def _output_value(flag: str, target: str) -> str:
    """A wrong value for ``flag`` in the work directory of :func:`_work_dir`."""
    if target == "unwritable":  # /proc takes no new file, not even from root
        return "/proc" if flag == "--out" else "/proc/r.out"
    if flag == "--out":  # a directory option: wrong when missing or when it is a file
        return "missing/out" if target == "missing-dir" else "a-file"
    return "missing/r.out" if target == "missing-dir" else "a-dir"


def _work_dir(tmp_path):
    work = tmp_path / "work"
    (work / "a-dir").mkdir(parents=True)
    (work / "a-file").write_text("mine")
    return work, sorted(p.name for p in work.rglob("*"))


def _nothing_written(work, before) -> None:
    assert sorted(p.name for p in work.rglob("*")) == before  # no stray temp file, no new dir
    assert (work / "a-file").read_text() == "mine"


@pytest.mark.parametrize("flag", ["--json", "--csv"])
@pytest.mark.parametrize("target", ["missing-dir", "directory"])
def test_output_path_is_checked_before_the_run(flag, target, tmp_path):
    work, before = _work_dir(tmp_path)
    value = _output_value(flag, target)
    proc = _bench("write-heavy", *TINY, flag, value, cwd=work)
    line = _one_line_error(proc)
    assert flag in line and value in line
    assert ("mkdir -p" in line) if target == "missing-dir" else ("is a directory" in line)
    assert "[OVERALL]" not in proc.stdout and "[LOAD" not in proc.stdout  # nothing ran
    _nothing_written(work, before)


@pytest.mark.parametrize("argv, flag", OUTPUT_COMMANDS, ids=lambda x: x if isinstance(x, str)
                         else x[0])
@pytest.mark.parametrize("target", ["missing-dir", "directory", "unwritable"])
def test_every_command_checks_its_output_paths_first(argv, flag, target, tmp_path, monkeypatch,
                                                    capsys):
    from bench.cli import main

    work, before = _work_dir(tmp_path)
    monkeypatch.chdir(work)
    value = _output_value(flag, target)
    assert main([*argv, flag, value]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"bench: error: {flag} {value}"), err
    assert out == ""  # nothing ran
    _nothing_written(work, before)


def test_output_where_no_file_can_be_created_is_refused_before_the_run(tmp_path):
    """``os.access`` says yes to root for ``/proc``: the check creates a file to know."""
    proc = _bench("write-heavy", *TINY, "--json", "/proc/x.json", cwd=tmp_path)
    line = _one_line_error(proc)
    assert "--json /proc/x.json: cannot create a file in /proc" in line
    assert "give a path in a writable directory" in line
    assert "[OVERALL]" not in proc.stdout and "[LOAD" not in proc.stdout  # nothing ran
    assert os.listdir(tmp_path) == []


def test_output_into_benchs_own_results_dir_is_created(tmp_path):
    proc = _bench("write-heavy", *TINY, "--json", "results/sub/r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "results" / "sub" / "r.json").is_file()


#: options naming a FILE that a command reads, not writes: ``reproduce``'s documents, edited in
#: place, YCSB's ``-P`` property files, ``bench spark``'s price table and the uniform run
#: ``bench checkmate --part skew`` takes its MSTs from, and the state directory whose servers
#: ``bench services up cluster --stores-state`` relays
INPUT_FILES = {"docs", "readme", "files", "prices", "mst_from", "stores_state"}


def test_every_output_option_is_checked():
    """A command's file or directory option is either an output checked by ``check_outputs``
    or one of the :data:`INPUT_FILES` it reads."""
    import argparse

    from bench.outputs import OUTPUT_DIRS, OUTPUT_FILES
    from bench.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, cmd in sub.choices.items():
        for action in cmd._actions:
            metavar = str(action.metavar or "")
            if action.option_strings and ("FILE" in metavar or "DIR" in metavar
                                          or metavar.endswith(".png") or metavar == "F"):
                if action.dest in INPUT_FILES:
                    continue
                assert action.dest in OUTPUT_FILES + OUTPUT_DIRS, (name, action.dest)


def test_minio_endpoint_that_is_not_a_url_is_one_line():
    proc = _bench("write-heavy", "--backend", "minio", "--opt", "endpoint=notaurl",
                  "--records", "5", "--ops", "5", "--no-progress")
    line = _one_line_error(proc)
    assert "endpoint='notaurl'" in line and "http://" in line and "--opt endpoint=" in line


def test_minio_endpoint_forms():
    from backends import backend_class

    minio = backend_class("minio")
    for good in ("http://127.0.0.1:9000", "https://s3.amazonaws.com", "http://[::1]:9000", ""):
        assert minio.parse_options({"endpoint": good})["endpoint"] == good
    for bad in ("notaurl", "127.0.0.1:9000", "ftp://host", "http://", "http://host:port"):
        with pytest.raises(BadOptionError, match="http:// or https:// URL"):
            minio.parse_options({"endpoint": bad})


def test_default_fs_key_without_utf8_form_is_a_clear_error(tmp_path):
    from backends import CkptError

    path = tmp_path / "store"
    with open_backend("default_fs", path=str(path)) as store:
        store.put("kept", b"intact")
        bad = "pe-\udcff"  # bytes decoded with surrogateescape
        for op in (lambda: store.put(bad, b"x"), lambda: store.get(bad), lambda: store.delete(bad),
                   lambda: store.put_many([("new", b"1"), (bad, b"2")])):
            with pytest.raises(CkptError, match=r"not valid unicode text.*surrogate.*utf-8") as err:
                op()
            assert not isinstance(err.value, UnicodeError)
        assert store.get("new") is None  # the batch failed before any write
        assert [k for k, _ in store.scan("")] == ["kept"]
    assert sorted(os.listdir(path)) == [".ckptbench-owner", "LOCK", "kept.ckpt"]


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_path_that_is_a_file_says_so(name, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    proc = _bench("recovery", "--backend", name, "--opt", f"path={blocker}", "--records", "5",
                  "--no-progress")
    line = _one_line_error(proc)
    assert str(blocker) in line and "is a file" in line and "--opt path=DIR" in line
    with pytest.raises(BackendUnavailableError, match=f"{blocker} is a file"):
        open_backend(name, path=str(blocker / "store"))  # a file further up: named too
    assert blocker.read_bytes() == b"not a directory"


def test_argparse_types_have_user_facing_names():
    """Every typed option of every command describes a bad value in the user's words."""
    import argparse

    from bench.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, cmd in sub.choices.items():
        for action in cmd._actions:
            if action.type in (None, str):
                continue
            shown = cmd._registry_get("type", action.type, action.type)  # int, float: registered
            assert "_" not in shown.__name__ and shown.__name__ not in ("int", "float", "parse"), \
                (name, action.dest, shown.__name__)


@pytest.mark.parametrize("argv, expected", [
    (("write-heavy", "--backend", "memory", "--ops", "x"), "'x' is not an integer"),
    (("write-heavy", "--backend", "memory", "--ops", "-1"), "must be >= 0"),
    (("write-heavy", "--backend", "memory", "--threads", "x"), "'x' is not an integer"),
    (("write-heavy", "--backend", "memory", "--duration", "nan"), "not a finite number"),
    (("write-heavy", "--backend", "memory", "--read-proportion", "x"), "'x' is not a number"),
    (("storage-compare", "--ops", "inf"), "'inf' is not a count"),
])
def test_bad_argument_value_message_shows_no_python_name(argv, expected):
    line = _one_line_error(_bench(*argv))
    assert expected in line
    assert "_int" not in line and "_float" not in line and "invalid int" not in line


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_spark_path_backend_without_path_gets_one_under_the_job_state(name, tmp_path):
    from bench.cli import build_parser
    from bench.spark_cli import settings_conf
    from spark_integration.conf import from_conf

    args = build_parser().parse_args(["spark", "--job", "wordcount", "--protocol", "coordinated",
                                      "--backend", name])
    settings = from_conf({**settings_conf(args), "spark.ckptbench.stateDir": str(tmp_path)})
    path = settings.backend_options["path"]
    assert path.startswith(os.path.join(str(tmp_path), settings.job_id) + os.sep)
    given = build_parser().parse_args(["spark", "--protocol", "coordinated", "--backend", name,
                                       "--opt", f"path={tmp_path / 'mine'}"])
    assert from_conf(settings_conf(given)).backend_options["path"] == str(tmp_path / "mine")


def test_spark_store_without_path_is_a_clear_error():
    from spark_integration.errors import SparkIntegrationError
    from spark_integration.settings import Settings
    from spark_integration.store import participant_store

    settings = Settings(backend="indexed_fs", protocol="coordinated", job_id="j")
    with pytest.raises(SparkIntegrationError, match="needs a path option"):
        with participant_store(settings, "i0"):
            pass



def _usage_error_in_process(argv, capsys) -> str:
    """The one ``bench: error:`` line (exit code 2, nothing on stdout) of ``bench argv`` run in
    this process: parse errors exit from argparse, later checks return from ``main``."""
    from bench.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out)
    assert err.count("\n") == 1 and err.startswith("bench: error: "), err
    return err


@pytest.mark.parametrize("command", ["spark", "spark-matrix"])
@pytest.mark.parametrize("argv, expected", [
    (("--events", "-5"), "--events: must be >= 1, got -5"),
    (("--events", "0"), "--events: must be >= 1, got 0"),
    (("--keys", "0"), "--keys: must be >= 1"),
    (("--batch", "0"), "--batch: must be >= 1"),
    (("--parallelism", "0"), "--parallelism: must be >= 1"),
    (("--interval", "0"), "--interval: must be >= 1"),
    (("--fail-at", "-1"), "--fail-at: must be >= 0"),
    (("--events", "100", "--fail-at", "100"), "--fail-at 100 is never reached by a job of --events 100"),
    (("--events", "x"), "'x' is not an integer"),
])
def test_spark_job_argument_out_of_range_is_one_line_before_spark_starts(command, argv, expected,
                                                                         capsys):
    """Checked before Spark starts: a negative count would run forever."""
    assert expected in _usage_error_in_process([command, *argv], capsys)


@pytest.mark.parametrize("argv, expected", [
    (("spark", "--full-every", "0"), "--full-every: must be >= 1"),
    (("spark", "--fail-instance", "-1"), "--fail-instance: must be >= 0"),
    (("spark", "--jitter", "-1"), "--jitter: must be >= 0"),
    (("spark", "--rate", "-1"), "--rate: must be >= 0"),
    (("spark", "--rate", "inf"), "'inf' is not a finite number"),
    (("spark", "--seed", "-1"), "--seed: must be >= 0"),
    (("spark", "--chunk-bytes", "8"), "--chunk-bytes: must be >= 64"),
    (("spark", "--window-events", "-1"), "--window-events: must be >= 0"),
    (("spark", "--protocol", "coordinated", "--backend", "indexed_fs", "--window-events", "100"),
     "windowEvents=100 drops a key's state when its window closes"),
    (("spark", "--layout", "rows"), "--layout: invalid choice: 'rows' (choose from 'changelog', 'per-key', 'chunks')"),
    (("spark-matrix", "--rounds", "0"), "--rounds 0: give 1 or more"),
    (("spark-matrix", "--warmup", "-1"), "--warmup -1: give 0 or more"),
])
def test_spark_command_argument_out_of_range_is_one_line(argv, expected, capsys):
    assert expected in _usage_error_in_process(argv, capsys)


def test_spark_bad_argument_from_the_shell_is_one_line():
    line = _one_line_error(_bench("spark", "--protocol", "coordinated", "--backend", "indexed_fs",
                                  "--events", "-5"))
    assert "--events: must be >= 1, got -5" in line


@pytest.mark.parametrize("content", [b"recordcount=5\n# caf\xe9 (ISO-8859-1)\n", b"\x89PNG\r\n\x1a\n\x00"])
def test_workload_file_that_is_not_utf8_is_one_line(content, tmp_path):
    props = tmp_path / "workload.properties"
    props.write_bytes(content)
    line = _one_line_error(_bench("load", "-P", str(props), "--backend", "memory", "--no-progress"))
    assert str(props) in line and "not UTF-8 text" in line and "save it as UTF-8" in line
    assert ("on line 2" in line) if content.startswith(b"record") else ("byte 0x89 on line 1" in line)
    assert props.read_bytes() == content


_GOOD_ROW = {"protocol": "coordinated", "backend": "indexed_fs", "throughput": 1000.0,
             "checkpoint_ms": 5.0, "recovery_ms": 0.0, "failures": 0, "skipped": None,
             "work": {"checkpoints": 3}}


@pytest.mark.parametrize("rows, expected", [
    ([1], "row 1 is int 1, not an object"),
    ([_GOOD_ROW, "x"], "row 2 is str 'x', not an object"),
    ([{**_GOOD_ROW, "protocol": None}], "row 1 has no protocol and backend names"),
    ([{**_GOOD_ROW, "throughput": "fast"}], "row 1 (coordinated/indexed_fs): throughput='fast' is not a number >= 0"),
    ([{**_GOOD_ROW, "checkpoint_ms": -5}], "checkpoint_ms=-5 is not a number >= 0"),
    ([{**_GOOD_ROW, "checkpoint_ms": float("nan")}], "checkpoint_ms=nan is not a number >= 0"),
    ([{**_GOOD_ROW, "failures": True}], "failures=True is not a number >= 0"),
    ([{**_GOOD_ROW, "work": [1, 2]}], "row 1 (coordinated/indexed_fs) work is [1, 2], not an object"),
    ([{**_GOOD_ROW, "work": {"checkpoints": "3"}}], "work: checkpoints='3' is not a number >= 0"),
])
def test_advise_from_a_matrix_with_malformed_rows_is_one_line(rows, expected, tmp_path, capsys):
    import json

    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps({"job": {"rate": 0}, "rows": rows}))
    out = tmp_path / "advise.json"
    err = _usage_error_in_process(["advise", "--from", str(matrix), "--mtbf", "1h", "--json", str(out),
                                   "--png", str(tmp_path / "advise.png")], capsys)
    assert f"{matrix}: " in err and expected in err and "give bench spark-matrix's JSON" in err
    assert not out.exists()


def test_advise_skipped_rows_are_not_checked_and_good_rows_advise(tmp_path, capsys):
    import json

    from bench.cli import main

    matrix = tmp_path / "matrix.json"
    skipped = {"protocol": "coordinated", "backend": "redis", "throughput": float("nan"),
               "skipped": "BackendUnavailableError: down", "work": None}
    matrix.write_text(json.dumps({"job": None, "rows": [_GOOD_ROW, skipped]}))
    assert main(["advise", "--from", str(matrix), "--mtbf", "1h", "--json", str(tmp_path / "a.json"),
                 "--png", str(tmp_path / "a.png")]) == 0
    assert "[ADVISE], Recommended, coordinated/indexed_fs" in capsys.readouterr().out


def test_ycsb_exportfile_is_checked_before_the_run(tmp_path):
    store = tmp_path / "store"
    proc = _bench("load", "workloada", "--backend", "indexed_fs", "--opt", f"path={store}",
                  "-p", "recordcount=5", "-p", "exportfile=/proc/x.txt", "--no-progress")
    line = _one_line_error(proc)
    assert "-p exportfile=/proc/x.txt: cannot create a file in /proc" in line
    assert not store.exists()  # nothing ran


def test_default_fs_bytes_after_a_checkpoint_cost_nothing_and_are_reported(tmp_path):
    """The header gives the checkpoint's exact length: an appended byte is not part of it, so the
    checkpoint (lengths and CRC verified) is read, and the extra bytes are a warning, left as
    they are; a damaged checkpoint is still never returned."""
    path = tmp_path / "store"
    with open_backend("default_fs", path=str(path)) as store:
        store.put("pe-1", b"A" * 100)
        store.put("pe-2", b"B" * 100)
        store.put("pe-3", b"C" * 100)
    with open(path / "pe-1.ckpt", "ab") as f:
        f.write(b"\x00")
    with open(path / "pe-2.ckpt", "ab") as f:
        f.write(b"garbage after the checkpoint")
    blob = bytearray((path / "pe-3.ckpt").read_bytes())
    blob[-1] ^= 0xFF  # inside the value: the CRC fails, extra bytes or not
    (path / "pe-3.ckpt").write_bytes(bytes(blob) + b"\x00")
    with open_backend("default_fs", path=str(path)) as store:
        assert store.stats()["warnings"] == []  # nothing read yet
        assert store.get("pe-1") == b"A" * 100
        assert store.get("pe-2") == b"B" * 100
        with pytest.raises(CorruptDataError, match="pe-3"):
            store.get("pe-3")
        warnings = store.stats()["warnings"]
        assert len(warnings) == 2
        assert "pe-1.ckpt" in warnings[0] and "1 byte(s) after its checkpoint" in warnings[0]
        assert "pe-2.ckpt" in warnings[1] and "28 byte(s)" in warnings[1]
        assert (path / "pe-1.ckpt").stat().st_size == 12 + 4 + 100 + 1  # left in place
        store.put("pe-1", b"new")  # a rewrite of the key ends its warning
        assert store.get("pe-1") == b"new"
        assert [w for w in store.stats()["warnings"] if "pe-1.ckpt" in w] == []
    blob = (path / "pe-2.ckpt").read_bytes()
    (path / "pe-2.ckpt").write_bytes(blob[:50])  # shorter than its header says: torn
    with open_backend("default_fs", path=str(path)) as store:
        with pytest.raises(CorruptDataError, match="pe-2"):
            store.get("pe-2")


@pytest.mark.parametrize("argv, expected", [
    (("sweep", "write-heavy", "--backends", "memory", "--targets", "x"), "'x' is not a number"),
    (("sweep", "write-heavy", "--backends", "memory", "--targets", "100,-5"), "must be > 0"),
    (("sweep", "write-heavy", "--backends", "memory", "--threads-sweep", "1,0"), "must be >= 1"),
])
def test_sweep_lists_are_checked_item_by_item(argv, expected):
    line = _one_line_error(_bench(*argv))
    assert expected in line and argv[-2] in line


@pytest.mark.parametrize("content, expected", [
    (b"[1, 2]", "a JSON list, not an object"),
    (b"\xff\xfe", "cannot read results file"),
])
def test_report_of_a_file_that_is_no_result_is_one_line(content, expected, tmp_path):
    doc = tmp_path / "x.json"
    doc.write_bytes(content)
    line = _one_line_error(_bench("report", str(doc), "--plot", str(tmp_path / "x.png")))
    assert expected in line and str(doc) in line
    assert not (tmp_path / "x.png").exists()
