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
                                      and no failAt
  spark.ckptbench.interval            micro-batches per checkpoint (coordinated epoch length)
  spark.ckptbench.jitter              uncoordinated: each checkpoint due interval +- up to this many
                                      micro-batches (< interval / 2; CheckMate: interval +- 1 s)
  spark.ckptbench.fullEvery           a full snapshot every N epochs (others are incremental)
  spark.ckptbench.jobId               namespace of this run's keys in the backend
  spark.ckptbench.stateDir            executor-local directory of the operators' working state
  spark.ckptbench.failAt              comma-separated event offsets at which to kill an instance
  spark.ckptbench.failInstance        the instance to kill (default: 0)
  spark.ckptbench.failPoint           with failAt: the named fail point (spark.worker.*,
                                      spark.<protocol>.*) at which the instance dies instead of
                                      right after applying its events (docs/spark.md)
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any, Mapping

from backends import backend_class

from .errors import SparkIntegrationError
from .protocols.registry import UnknownProtocolError, protocol_names, registration
from .settings import Settings

PREFIX = "spark.ckptbench."
BACKEND_PREFIX = PREFIX + "backend."

_KEYS = ("backend", "protocol", "interval", "jitter", "fullEvery", "jobId", "stateDir", "failAt",
         "failInstance", "failPoint")


def default_state_dir() -> str:
    """tmpfs when there is one: working state is memory, not durable storage."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, "ckptbench-spark")


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


def _int(key: str, text: str, minimum: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise SparkIntegrationError(f"{PREFIX}{key}={text!r} is not an integer") from None
    if value < minimum:
        raise SparkIntegrationError(f"{PREFIX}{key}={value} must be >= {minimum}")
    return value


def from_conf(conf: Any) -> Settings:
    """Validate the ``spark.ckptbench.*`` entries of ``conf`` into :class:`Settings`."""
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

    protocol = plain.get("protocol", "none").strip().lower()
    try:
        reg = registration(protocol)
    except UnknownProtocolError:
        raise UnknownProtocolError(f"{PREFIX}protocol={protocol!r} is not valid; valid protocols: "
                                   f"{', '.join(protocol_names())}") from None

    job_id = plain.get("jobId", "").strip() or f"job-{uuid.uuid4().hex[:10]}"
    state_dir = plain.get("stateDir", "").strip() or default_state_dir()
    backend = plain.get("backend", "").strip() or None
    if reg.baseline and (backend or backend_opts):
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
        if backend_opts:
            raise SparkIntegrationError(
                f"{BACKEND_PREFIX}{sorted(backend_opts)[0]} is set but {PREFIX}backend is not"
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
        cls.parse_options(backend_opts)
        options = dict(backend_opts)
        if "path" in options:
            options["path"] = os.path.abspath(os.path.expanduser(options["path"]))
        elif "path" in cls.all_options() and reg.uses_backend:
            options["path"] = default_store_path(state_dir, job_id)

    fail_at: tuple[int, ...] = ()
    if plain.get("failAt", "").strip():
        parts = [p for p in plain["failAt"].replace(" ", "").split(",") if p]
        fail_at = tuple(sorted(_int("failAt", p, 0) for p in parts))
    if fail_at and not reg.failure_injection:
        raise SparkIntegrationError(
            f"{PREFIX}protocol={protocol} runs without injected failures; drop {PREFIX}failAt")

    fail_point = plain.get("failPoint", "").strip()
    if fail_point and (not fail_at or not fail_point.startswith("spark.")):
        raise SparkIntegrationError(
            f"{PREFIX}failPoint={fail_point!r} needs {PREFIX}failAt (the offset from which it is armed) and "
            f"a name of the form spark.<owner>.<step>, e.g. spark.worker.before_checkpoint")

    interval = _int("interval", plain.get("interval", "1"), 1)
    jitter = _int("jitter", plain.get("jitter", "0"), 0)
    if 2 * jitter >= interval:
        raise SparkIntegrationError(
            f"{PREFIX}jitter={jitter} must be below half of {PREFIX}interval={interval} (so an "
            f"instance's checkpoints stay in order); raise the interval or lower the jitter"
        )

    return Settings(
        backend=backend,
        backend_options=options,
        protocol=protocol,
        interval=interval,
        jitter=jitter,
        full_every=_int("fullEvery", plain.get("fullEvery", "10"), 1),
        job_id=job_id,
        state_dir=state_dir,
        fail_at=fail_at,
        fail_instance=_int("failInstance", plain.get("failInstance", "0"), 0),
        fail_point=fail_point,
        writes_checkpoints=reg.uses_backend,
    )


def to_conf(settings_kv: Mapping[str, Any], backend_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The inverse helper for launchers: ``{"protocol": "coordinated"}`` -> Spark conf entries."""
    out = {PREFIX + k: str(v) for k, v in settings_kv.items() if v is not None}
    for k, v in (backend_options or {}).items():
        out[BACKEND_PREFIX + k] = str(v)
    return out


__all__ = ["PREFIX", "BACKEND_PREFIX", "Settings", "SparkIntegrationError", "default_state_dir",
           "default_store_path", "from_conf", "to_conf"]
