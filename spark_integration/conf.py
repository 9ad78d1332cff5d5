"""``spark.ckptbench.*`` -> one validated, picklable :class:`~spark_integration.settings.Settings`.

Read once on the driver (from a ``SparkConf``, a ``SparkSession`` or a plain mapping), validated
with one clear message per mistake, and shipped to the executors inside the task closures — so
executors never read the Spark conf and a cluster run behaves like ``local[*]``.

Keys (all optional except the backend when the protocol writes checkpoints):

  spark.ckptbench.backend             a registered backend name (``backends.backend_names()``)
  spark.ckptbench.backend.<option>    that backend's options (validated by its ``parse_options``);
                                      ``path`` defaults to :func:`default_store_path`
  spark.ckptbench.protocol            a registered protocol (``protocols.registry.protocol_names()``),
                                      e.g. coordinated; a baseline (spark-state) takes no backend
  spark.ckptbench.interval            micro-batches per checkpoint (coordinated epoch length)
  spark.ckptbench.jitter              uncoordinated: each checkpoint due interval +- up to this many
                                      micro-batches (< interval / 2; CheckMate: interval +- 1 s)
  spark.ckptbench.fullEvery           a full snapshot every N epochs (others are incremental);
                                      logio: a full commit every N x interval Input Sets;
                                      uncoordinated: every Nth checkpoint of an instance full
                                      (1: all full, as CheckMate)
  spark.ckptbench.jobId               namespace of this run's keys in the backend
  spark.ckptbench.stateDir            executor-local directory of the operators' working state
  spark.ckptbench.failAt              comma-separated event offsets at which to kill an instance
  spark.ckptbench.failInstance        the instance to kill (default: 0)
  spark.ckptbench.stateBytes          bytes of state per key beside its count: 0 (default), BYTES,
                                      uniform:LO:HI or lognormal:MEDIAN:SIGMA (:mod:`.state_size`)
  spark.ckptbench.windowEvents        tumbling windows of this many source events: a key's state
                                      is dropped when its window closes, so checkpoints delete as
                                      well as write (needs stateBytes; 0 = keys live for ever)
  spark.ckptbench.layout            how a checkpoint becomes records: changelog (default), per-key,
                                      chunks (:mod:`.layouts`)
  spark.ckptbench.chunkBytes        the chunks layout's object size in bytes (default 4 MiB)
  spark.ckptbench.coldRestore       true: evict the store's files from the page cache before each
                                      restore (default false)
  spark.ckptbench.retainCheckpoints true: leave the job's checkpoints in the store when it ends,
                                      as Flink's RETAIN_ON_CANCELLATION does (default false: a
                                      run that ends deletes them, once measured; a failed run
                                      always leaves them, for --resume and as evidence)
  spark.ckptbench.checkpointLocation  a baseline's own checkpoint location (spark-state: Spark's
                                      checkpointLocation, a directory or hdfs://HOST:PORT/DIR);
                                      default: a fresh directory on the local disk
  spark.ckptbench.failPoint           with failAt: the named fail point (spark.worker.*,
                                      spark.<protocol>.*; spark.sender.* of a protocol whose
                                      senders log) at which the instance (the sender) dies
                                      instead of right after applying its events (docs/spark.md)
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any, Iterable, Mapping

from backends import backend_class
from backends.media import is_remote_url

from .errors import SparkIntegrationError
from .layouts.registry import DEFAULT as DEFAULT_LAYOUT, DEFAULT_CHUNK_BYTES, layout_names
from .protocols.registry import UnknownProtocolError, protocol_names, registration
from .settings import Settings
from .state_size import StateSize, parse_state_size

PREFIX = "spark.ckptbench."
BACKEND_PREFIX = PREFIX + "backend."

_KEYS = ("backend", "protocol", "interval", "jitter", "fullEvery", "jobId", "stateDir", "failAt",
         "failInstance", "failPoint", "stateBytes", "windowEvents", "layout", "chunkBytes",
         "coldRestore", "retainCheckpoints", "checkpointLocation")


#: the environment variable that moves :func:`default_state_dir` (a harness running many jobs
#: gives each its own, to remove whatever a job it had to stop left there)
STATE_DIR_ENV = "CKPTBENCH_SPARK_STATE_DIR"


def default_state_dir() -> str:
    """tmpfs when there is one: working state is memory, not durable storage; ``$CKPTBENCH_SPARK_STATE_DIR``
    when it is set."""
    if os.environ.get(STATE_DIR_ENV):
        return os.environ[STATE_DIR_ENV]
    return os.path.join(memory_dir(), "ckptbench-spark")


def memory_dir() -> str:
    """``/dev/shm`` when it is there and writable (tmpfs: memory), else the temporary directory."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def default_store_path(state_dir: str, job_id: str) -> str:
    """Where a backend with a ``path`` option keeps a job's checkpoints when none is given:
    inside the job's own working state (``<stateDir>/<jobId>/checkpoints``), so it is fresh for
    every run and removed with that state when the job ends — as ``bench write-heavy`` uses a
    temporary directory.  It lives where the working state does (tmpfs by default, see
    :func:`default_state_dir`: give ``path`` to measure a disk) and it is executor-local, so it
    holds on a single-machine master; executors on several hosts need a shared ``path``."""
    return os.path.join(os.path.abspath(os.path.expanduser(state_dir)), job_id, "checkpoints")


def _entries(conf: Any) -> dict[str, str]:
    """``spark.ckptbench.*`` entries of a SparkSession, SparkConf or mapping."""
    if hasattr(conf, "sparkContext"):  # SparkSession
        conf = conf.sparkContext.getConf()
    if hasattr(conf, "getAll"):  # SparkConf
        items = conf.getAll()
    elif isinstance(conf, Mapping):
        items = conf.items()
    else:
        raise TypeError(f"expected a SparkSession, SparkConf or mapping, not {type(conf).__name__}")
    return {str(k): str(v) for k, v in items if str(k).startswith(PREFIX)}


def _int(key: str, text: str) -> int:
    """The integer a conf entry spells (its range is :func:`build`'s to check)."""
    try:
        return int(text.strip())
    except ValueError:
        raise SparkIntegrationError(f"{PREFIX}{key}={text!r} is not an integer") from None


def _at_least(key: str, value: int, minimum: int) -> int:
    if value < minimum:
        raise SparkIntegrationError(f"{PREFIX}{key}={value} must be >= {minimum}")
    return value


def build(protocol: str = "none", backend: str | None = None,
          backend_options: Mapping[str, Any] | None = None, *, interval: int = 1, jitter: int = 0,
          full_every: int = 10, job_id: str = "", state_dir: str = "", fail_at: Iterable[int] = (),
          fail_instance: int = 0, fail_point: str = "", state_bytes: "str | int | StateSize" = 0,
          window_events: int = 0, layout: str = DEFAULT_LAYOUT, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
          cold_restore: bool = False, retain_checkpoints: bool = False,
          checkpoint_location: str = "") -> Settings:
    """Validated :class:`Settings` from typed values: every check :func:`from_conf` makes.

    Launchers in Python (the experiments) call this directly; :func:`from_conf` only parses the
    conf's strings and calls it, so both are held to the same rules and the same messages, which
    name the ``spark.ckptbench.*`` key a mistake is about.  ``job_id`` and ``state_dir`` default
    to a fresh id and :func:`default_state_dir`; a path backend's ``path`` to
    :func:`default_store_path`.
    """
    protocol = protocol.strip().lower()
    try:
        reg = registration(protocol)
    except UnknownProtocolError:
        raise UnknownProtocolError(f"{PREFIX}protocol={protocol!r} is not valid; valid protocols: "
                                   f"{', '.join(protocol_names())}") from None

    job_id = job_id.strip() or f"job-{uuid.uuid4().hex[:10]}"
    state_dir = state_dir.strip() or default_state_dir()
    backend = (backend or "").strip() or None
    given = dict(backend_options or {})
    if reg.baseline and (backend or given):
        raise SparkIntegrationError(
            f"{PREFIX}protocol={protocol} is a baseline that keeps its state in Spark's own store; "
            f"drop {PREFIX}backend and its options")
    options: dict[str, Any] = {}
    if backend is None:
        if reg.uses_backend:
            raise SparkIntegrationError(
                f"{PREFIX}protocol={protocol} writes checkpoints but {PREFIX}backend is not set; "
                f"set it, e.g. --conf {PREFIX}backend=indexed_fs --conf {BACKEND_PREFIX}path=DIR"
            )
        if given:
            raise SparkIntegrationError(
                f"{BACKEND_PREFIX}{sorted(given)[0]} is set but {PREFIX}backend is not"
            )
    else:
        cls = backend_class(backend)  # UnknownBackendError lists the valid names
        if not cls.persistent and reg.uses_backend:
            raise SparkIntegrationError(
                f"{PREFIX}backend={backend!r} keeps its data inside one process, but Spark executors "
                f"run in separate Python workers; use a shared store (e.g. default_fs, indexed_fs, redis)"
            )
        # BadOptionError names the bad option and the valid ones; keep only what was given so
        # defaults stay the backend's own.
        cls.parse_options(given)
        options = given
        path = options.get("path")  # given, so the class declares it (parse_options checked)
        if path is not None:  # a directory made absolute; an hdfs:// or nfs:// URL stays one
            if not is_remote_url(str(path)):
                options["path"] = os.path.abspath(os.path.expanduser(str(path)))
        elif cls.keeps_a_directory() and reg.uses_backend:
            options["path"] = default_store_path(state_dir, job_id)

    checkpoint_location = checkpoint_location.strip()
    if checkpoint_location and not reg.baseline:
        raise SparkIntegrationError(
            f"{PREFIX}checkpointLocation places a baseline's own checkpoints; protocol={protocol} "
            f"writes to its backend: give {BACKEND_PREFIX}path instead")

    offsets = tuple(sorted(_at_least("failAt", int(o), 0) for o in fail_at))
    if offsets and not reg.failure_injection:
        raise SparkIntegrationError(
            f"{PREFIX}protocol={protocol} runs without injected failures; drop {PREFIX}failAt")

    fail_point = fail_point.strip()
    if fail_point and (not offsets or not fail_point.startswith("spark.")):
        raise SparkIntegrationError(
            f"{PREFIX}failPoint={fail_point!r} needs {PREFIX}failAt (the offset from which it is armed) and "
            f"a name of the form spark.<owner>.<step>, e.g. spark.worker.before_checkpoint")

    _at_least("interval", interval, 1)
    _at_least("jitter", jitter, 0)
    if 2 * jitter >= interval:
        raise SparkIntegrationError(
            f"{PREFIX}jitter={jitter} must be below half of {PREFIX}interval={interval} (so an "
            f"instance's checkpoints stay in order); raise the interval or lower the jitter"
        )

    try:
        size = parse_state_size(state_bytes)
    except SparkIntegrationError as exc:
        raise SparkIntegrationError(f"{PREFIX}stateBytes: {exc}") from None
    if _at_least("windowEvents", window_events, 0) and not size.sized:
        raise SparkIntegrationError(
            f"{PREFIX}windowEvents={window_events} drops a key's state when its window closes and "
            f"reads the key's window from its state bytes; set {PREFIX}stateBytes too (e.g. 64)")

    layout = layout.strip().lower()
    if layout not in layout_names():
        raise SparkIntegrationError(f"{PREFIX}layout={layout!r} is not valid; valid layouts: "
                                    f"{', '.join(layout_names())}")

    return Settings(
        backend=backend,
        backend_options=options,
        protocol=protocol,
        interval=interval,
        jitter=jitter,
        full_every=_at_least("fullEvery", full_every, 1),
        job_id=job_id,
        state_dir=state_dir,
        fail_at=offsets,
        fail_instance=_at_least("failInstance", fail_instance, 0),
        fail_point=fail_point,
        state_bytes=str(size),
        window_events=window_events,
        layout=layout,
        chunk_bytes=_at_least("chunkBytes", chunk_bytes, 64),
        cold_restore=bool(cold_restore),
        retain_checkpoints=bool(retain_checkpoints),
        checkpoint_location=checkpoint_location,
        writes_checkpoints=reg.uses_backend,
    )


def _bool(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise SparkIntegrationError(f"{PREFIX}{key}={text!r} is not valid; give true or false")
    return value == "true"


def from_conf(conf: Any) -> Settings:
    """Parse the ``spark.ckptbench.*`` entries of ``conf`` and validate them with :func:`build`."""
    entries = _entries(conf)
    plain: dict[str, str] = {}
    backend_opts: dict[str, str] = {}
    for key, value in entries.items():
        if key.startswith(BACKEND_PREFIX):
            backend_opts[key[len(BACKEND_PREFIX):]] = value
            continue
        short = key[len(PREFIX):]
        if short not in _KEYS:
            raise SparkIntegrationError(
                f"unknown Spark conf key {key!r}; valid keys: "
                + ", ".join(PREFIX + k for k in _KEYS)
                + f", {BACKEND_PREFIX}<option>"
            )
        plain[short] = value

    def number(key: str, default: str) -> int:
        return _int(key, plain.get(key, default))

    fail_at = [_int("failAt", p) for p in plain.get("failAt", "").replace(" ", "").split(",") if p]
    return build(plain.get("protocol", "none"), plain.get("backend"), backend_opts,
                 interval=number("interval", "1"), jitter=number("jitter", "0"),
                 full_every=number("fullEvery", "10"), job_id=plain.get("jobId", ""),
                 state_dir=plain.get("stateDir", ""), fail_at=fail_at,
                 fail_instance=number("failInstance", "0"), fail_point=plain.get("failPoint", ""),
                 state_bytes=plain.get("stateBytes", "0"), window_events=number("windowEvents", "0"),
                 layout=plain.get("layout", DEFAULT_LAYOUT),
                 chunk_bytes=number("chunkBytes", str(DEFAULT_CHUNK_BYTES)),
                 cold_restore=_bool("coldRestore", plain.get("coldRestore", "false")),
                 retain_checkpoints=_bool("retainCheckpoints", plain.get("retainCheckpoints", "false")),
                 checkpoint_location=plain.get("checkpointLocation", ""))


def to_conf(settings_kv: Mapping[str, Any], backend_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The inverse helper for launchers: ``{"protocol": "coordinated"}`` -> Spark conf entries."""
    out = {PREFIX + k: str(v) for k, v in settings_kv.items() if v is not None}
    for k, v in (backend_options or {}).items():
        out[BACKEND_PREFIX + k] = str(v)
    return out


__all__ = ["PREFIX", "BACKEND_PREFIX", "Settings", "SparkIntegrationError", "default_state_dir",
           "build", "default_store_path", "from_conf", "to_conf"]
