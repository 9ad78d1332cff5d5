"""The one interface every checkpoint store implements, its options and its errors.

The shape follows YCSB's ``DB`` class: a handful of operations on opaque values, plus what a
checkpoint store needs on top (durability declaration, ``flush``, ``stats``).  A checkpoint is the
latest serialized state of one keyed processing element: keys are ``str``, values ``bytes``.

Shared logic lives here once: option declaration and parsing (also from ``--opt k=v`` strings),
argument checks, the closed-store guard, and retry with bounded exponential backoff for the
networked backends.

Closing while other threads use the store (:meth:`Backend.close`).  Invariants:

* an operation that starts after ``close()`` began raises :class:`StoreClosedError`;
* an operation already running when ``close()`` began runs to its end (it completes, or fails
  as it would have without the close) before the backend's ``_close`` tears anything down, so
  no operation ever meets a closed file, connection or thread half-way: what it acknowledged is
  acknowledged, and the flush in ``_close`` covers it;
* ``close()`` returns once, for every caller: a second (or concurrent) call waits for the first
  and then returns, raising nothing.

Why it is safe: every public operation puts a token on ``_inflight`` *before* it reads
``_closed``, and ``close()`` sets ``_closed`` *before* it looks at ``_inflight``.  Under the
GIL these steps are ordered, so either close sees the token (and waits for it), or the
operation sees ``_closed`` (and raises).  A list is used because ``append`` and ``pop`` are
single atomic calls: the hot path takes no lock, and ``close()``, which is rare, polls.  How long
it waits is bounded (:data:`CLOSE_DRAIN_S`): an operation stuck longer (a server that stopped
answering) is left to its own timeout, and the store is closed under it.
"""

from __future__ import annotations

import abc
import math
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Sequence, TypeVar

from .ledger import Ledger

T = TypeVar("T")


# --------------------------------------------------------------------------------------- errors
class CkptError(Exception):
    """Base of every error a backend raises on purpose: callers can catch this one type."""


class UnknownBackendError(CkptError, ValueError):
    """A backend name that is not registered."""


class BadOptionError(CkptError, ValueError):
    """An option a backend does not know, or a value it cannot take."""


class ForeignDirectoryError(BadOptionError):
    """A ``path`` that holds another backend's store: refused before anything in it is touched."""


class BackendUnavailableError(CkptError):
    """The server, path or library behind a backend cannot be reached or used."""


class StoreLockedError(BackendUnavailableError):
    """Another process holds the store's single-writer lock."""


class ThrottledError(BackendUnavailableError):
    """The medium kept refusing a request as over its request rate (S3's ``503 SlowDown``) until
    the client's retries ran out; the request did nothing (a refused write is not stored), and
    it was not acknowledged."""


class StorageFullError(CkptError):
    """The medium has no space left; the failed write was not acknowledged, stored data is intact."""


class CorruptDataError(CkptError):
    """Stored bytes failed their checksum or could not be decoded; they are never returned as data."""


class StoreClosedError(CkptError):
    """An operation on a store after ``close()``."""


class BadKeyError(CkptError, ValueError):
    """A key the backend cannot store: no utf-8 form (a ``str`` with a lone surrogate, from bytes
    decoded with ``surrogateescape``, say), or longer than its format allows.  Rejected before
    anything is written."""


class NoFieldsError(CkptError, TypeError):
    """A record-of-fields operation (``put_fields``, ``get_fields`` ...) on a store that keeps
    one opaque value per key (its ``record_fields`` is false): a caller asks ``record_fields``
    first and, without it, encodes its record into one value."""


class RecordModelError(CkptError, ValueError):
    """A key read or written in the other record model than the one it holds: a value written
    by ``put`` asked for with ``get_fields``, or a record of fields with ``get``.  Nothing is
    changed; read the key the way it was written (load and run with the same record model)."""


class ValueTooLargeError(CkptError, ValueError):
    """A value longer than the backend's format can carry (``Backend.max_value_bytes``); it is
    rejected before anything is written."""


# -------------------------------------------------------------------------------------- options
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

#: the longest period or wait (seconds) a time option may declare.  A background timer sleeps in
#: ``threading.Event.wait``, which rejects timeouts above ``threading.TIMEOUT_MAX`` (a platform
#: limit, weeks on some systems); a week is far below it everywhere, and a timer that fires less
#: than once a week never fires in a benchmark run — an option that means "never" says so with 0.
LONGEST_WAIT_S = 7 * 24 * 3600.0

#: the longest ``close()`` waits for operations already in flight to end (see the module
#: docstring); above the retry deadline of every networked backend's default options (the
#: longest: hbase, four tries of a 10 s Thrift call), so that only an operation that hangs past
#: its own timeout is closed under
CLOSE_DRAIN_S = 60.0


@dataclass(frozen=True)
class Option:
    """One declared backend option: its type, default, help text and allowed values.

    ``type`` is one of ``str``, ``int``, ``float``, ``bool``; string values (from the CLI or a
    Spark conf) are converted, anything else is checked.  What a value may be is declared here,
    once, and checked by :meth:`convert`, so a bad value always gives the same one-line
    :class:`BadOptionError` naming the backend, the option, the value, what is allowed and the fix:

    * ``choices``: the only values allowed;
    * ``min`` / ``max``: inclusive bounds of a number; ``min_exclusive`` makes ``min`` itself
      invalid (a positive timeout: ``min=0, min_exclusive=True``);
    * ``finite``: reject ``inf`` and ``-inf`` (``None``, the default, means yes for a ``float``);
      ``nan`` is never allowed (it compares false with every bound);
    * ``nonempty``: reject ``""`` for a ``str`` (``None`` stays allowed: a required option with no
      default is checked where it is used, with a message saying what to give);
    * ``max_bytes``: the longest utf-8 encoding a ``str`` may have.

    The default of every option must itself be allowed (``None`` always is).
    """

    type: type = str
    default: Any = None
    help: str = ""
    choices: Sequence[Any] | None = None
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    finite: bool | None = None
    nonempty: bool = False
    max_bytes: int | None = None

    def convert(self, backend: str, name: str, value: Any) -> Any:
        """``value`` as this option's type, or one :class:`BadOptionError` saying what is wrong."""
        if value is None:
            return None
        try:
            if isinstance(value, str) and self.type is not str:
                text = value.strip().lower()
                if self.type is bool:
                    if text in _TRUE:
                        value = True
                    elif text in _FALSE:
                        value = False
                    else:
                        raise ValueError(value)
                else:
                    value = self.type(value)
            elif self.type is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            elif not isinstance(value, self.type) or (self.type is int and isinstance(value, bool)):
                raise ValueError(value)
        except ValueError:
            raise BadOptionError(
                f"backend {backend!r}: option {name}={value!r} is not a valid {self.type.__name__}"
            ) from None
        if self.choices is not None and value not in self.choices:
            raise BadOptionError(
                f"backend {backend!r}: option {name}={value!r} is not one of "
                f"{', '.join(map(str, self.choices))}"
            )
        if not self.allows(value):
            raise BadOptionError(
                f"backend {backend!r}: option {name}={_clipped(value)} is not allowed: it must be "
                f"{self.allowed()}; {self._fix(name)}"
            )
        return value

    def allows(self, value: Any) -> bool:
        """Whether ``value`` (already of this option's type) is within the declared range."""
        if self.type is str:
            if self.nonempty and value == "":
                return False
            return self.max_bytes is None or len(value.encode("utf-8", "surrogatepass")) \
                <= self.max_bytes
        if self.type not in (int, float):
            return True
        if self.type is float and (self.finite is None or self.finite) and not math.isfinite(value):
            return False
        if self.min is not None and (value < self.min or (self.min_exclusive and value == self.min)):
            return False
        if self.max is not None and value > self.max:
            return False
        return value == value  # nan: outside every range

    def allowed(self) -> str:
        """The declared range in words, e.g. ``a finite number > 0 and <= 604800``."""
        if self.type is str:
            what = "a non-empty string" if self.nonempty else "a string"
            if self.max_bytes is not None:
                what += f" of at most {self.max_bytes} utf-8 bytes"
            return what
        if self.type is int:
            what = "an integer"
        elif self.finite is None or self.finite:
            what = "a finite number"
        else:
            what = "a number (finite, or inf)"
        bounds = []
        if self.min is not None:
            bounds.append(f"{'>' if self.min_exclusive else '>='} {_shown(self.min)}")
        if self.max is not None:
            bounds.append(f"<= {_shown(self.max)}")
        return f"{what} {' and '.join(bounds)}" if bounds else what

    def _fix(self, name: str) -> str:
        """How to give a valid value: the default where there is one, else a bound."""
        if self.default is not None:
            return f"e.g. --opt {name}={_shown(self.default)} (the default)"
        if self.type is str:
            return f"give one with --opt {name}=VALUE" + (f": {self.help}" if self.help else "")
        bound = self.min if self.min is not None and not self.min_exclusive else self.max
        return f"e.g. --opt {name}={_shown(bound)}" if bound is not None else "give another value"

    def __post_init__(self) -> None:
        default = self.default
        if default is not None and (self.choices is not None and default not in self.choices
                                    or not self.allows(default)):
            raise ValueError(f"option default {default!r} is not allowed by its own declaration "
                             f"({self.allowed()})")


def _clipped(value: Any, width: int = 60) -> str:
    """``repr(value)``, cut short so that a message stays one readable line."""
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 5]}...{text[-2:]}"


def binary_units(n: float) -> tuple[float, str]:
    """``n`` bytes as (value, unit) in the largest binary unit it fills: ``B``, ``KiB`` … ``TiB``."""
    size, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return size, unit


def _binary_size(n: int) -> str:
    """``n`` bytes in the largest binary unit that keeps one decimal, e.g. ``2.0 GiB``."""
    size, unit = binary_units(n)
    return f"{size:.1f} {unit}" if unit != "B" else f"{n} bytes"


def _shown(x: Any) -> str:
    """A value as the user would type it after ``--opt name=`` (no ``.0`` on whole floats)."""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def parse_kv(pairs: Iterable[str]) -> dict[str, str]:
    """``["path=/x", "port=1"]`` -> ``{"path": "/x", "port": "1"}`` (the CLI's repeatable ``--opt``)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadOptionError(f"option {pair!r} is not KEY=VALUE (e.g. --opt path=/tmp/ckpt)")
        out[key.strip()] = value
    return out


# ------------------------------------------------------------------------------------- claims
@dataclass(frozen=True)
class Claim:
    """What one durability mode promises about an acknowledged write, declared by the backend
    that makes the promise: ``bench audit`` prints ``text`` as its Claim line and fails the mode
    on a loss only where the claim says nothing may be lost, and the README's audit table prints
    the same words.

    ``crash_safe``: an acknowledged write survives a process crash (SIGKILL of the writer, and of
    the server for a server backend: the page cache survives).  ``power_safe``: it survives a
    power cut too (everything not fsynced is gone).  ``note``: a remark a power-loss audit adds
    about what its cuts measured; it may name ``{file_syncs}``, ``{global_syncs}`` and
    ``{acknowledged}``, the audit's counts.
    """

    mode: str
    text: str
    crash_safe: bool
    power_safe: bool
    note: str = ""


def no_claim(mode: str) -> Claim:
    """What a mode without a declared claim promises, as the audit says it: nothing."""
    return Claim(mode, f"{mode}: (no stated claim)", crash_safe=False, power_safe=False)


# ------------------------------------------------------------------------------------ interface
def _plain_bytes(value: bytes | bytearray | memoryview) -> bytes | memoryview:
    """``value`` as a store that takes buffers gets it: a flat byte view as it is (no copy),
    anything else (an array's typed or strided view) as ``bytes``."""
    if type(value) is memoryview and value.format == "B" and value.ndim == 1 and value.c_contiguous:
        return value
    return value if type(value) is bytes else bytes(value)



def _check_prefix(prefix: Any, what: str) -> None:
    """A prefix of :meth:`Backend.scan`, :meth:`~Backend.keys` or :meth:`~Backend.scan_fields`
    is a ``str`` (``what``: which calls' prefixes, for the message)."""
    if type(prefix) is not str:
        raise TypeError(f"{what} prefixes are str, not {type(prefix).__name__}")


class Backend(abc.ABC):
    """A checkpoint store.  Subclasses declare ``name``, ``durability_modes`` and ``options``
    and implement the ``_``-prefixed primitives; the public methods add argument checks and the
    closed-store guard so that every backend behaves the same at its edges.

    Batch and scan operations have correct default implementations in terms of the single-key
    ones; backends override them where the medium has something faster (pipelines, batches).
    """

    name: ClassVar[str] = ""
    #: durability modes this backend supports; the first one is the default.
    durability_modes: ClassVar[tuple[str, ...]] = ("none",)
    #: backend-specific options (``durability`` is added for every backend).
    options: ClassVar[Mapping[str, Option]] = {}
    #: whether data outlives ``close()`` (every real store; not ``memory``).
    persistent: ClassVar[bool] = True
    #: what kind of store it is: ``file`` (files of its own format in a directory, on any
    #: medium: local, ``nfs://``, ``hdfs://``), ``embedded`` (a library's files in a local
    #: directory), ``server`` (a server the store talks to) or ``memory``; with ``path``, the
    #: two directory kinds name their directory (:meth:`keeps_a_directory`)
    kind: ClassVar[str] = "memory"
    #: the longest value the backend's format can carry; a longer one is refused by ``put`` and
    #: ``put_many`` with :class:`ValueTooLargeError` before anything is written (``sys.maxsize``:
    #: no limit of its own).
    max_value_bytes: ClassVar[int] = sys.maxsize
    #: the most bytes (values plus keys) and items one ``_put_many`` call may carry: a larger
    #: batch reaches the store as several calls, in order (``sys.maxsize``: no limit of its own)
    max_batch_bytes: ClassVar[int] = sys.maxsize
    max_batch_items: ClassVar[int] = sys.maxsize
    #: whether ``_put_many`` takes any buffer (``memoryview`` of a larger array) as a value: a
    #: store that writes values out with a gather write then copies none of them; the others are
    #: given ``bytes``, which their client libraries expect
    takes_buffers: ClassVar[bool] = False
    #: the media the store's data can live on: ``local``, ``nfs``, ``hdfs``.  A file backend
    #: reaches them through its ``path`` (a directory or an ``nfs://`` / ``hdfs://`` URL); a
    #: server backend with more than one keeps its data on the one its server was started on
    media: ClassVar[tuple[str, ...]] = ("local",)
    #: the medium a mode means something on, where it differs from the first of :attr:`media`
    mode_media: ClassVar[dict[str, str]] = {}
    #: the promise of each durability mode (:class:`Claim`), on the first of :attr:`media`
    claims: ClassVar[Mapping[str, Claim]] = {}
    #: claims that differ on another medium: medium -> mode -> claim (HBase on HDFS)
    medium_claims: ClassVar[Mapping[str, Mapping[str, Claim]]] = {}
    #: durability modes set on the server rather than by the client (Redis: its ``appendfsync``
    #: policy); when given, these are the modes the claims (and a crash audit) are about
    server_modes: ClassVar[tuple[str, ...]] = ()
    #: the mode a crash audit checks unless told: the one that claims durability
    audit_mode: ClassVar[str] = ""
    #: the longest a crash audit lets the writer run before a random cut, in seconds: long enough
    #: for acknowledged writes at the store's pace (a server answers slower than a file)
    audit_run_seconds: ClassVar[float] = 0.6
    #: whether the store keeps a record of named fields per key (:meth:`put_fields`,
    #: :meth:`get_fields`, :meth:`scan_fields`), so that one field is written or read without
    #: the others (a Redis hash).  Without it every field operation raises
    #: :class:`NoFieldsError`, and a caller encodes its record into one value
    #: (:mod:`workloads.record`).  A key holds one model: a value (``put``) or fields.
    record_fields: ClassVar[bool] = False

    def __init__(self, **options: Any) -> None:
        self.config = self.parse_options(options)
        self.durability: str = self.config["durability"]
        self._closed = False
        #: one token per public operation in flight (see the module docstring)
        self._inflight: list[None] = []
        self._close_lock = threading.Lock()
        #: the requests this store sent to its medium since it was opened (:mod:`.ledger`)
        self.ledger = Ledger()

    @classmethod
    def keeps_a_directory(cls) -> bool:
        """Whether the store keeps its data in a directory named by its ``path`` option (the
        ``file`` and ``embedded`` kinds): callers give it a fresh or shared directory, servers
        a namespace instead."""
        return cls.kind in ("file", "embedded")

    # -- claims ---------------------------------------------------------------------------
    @classmethod
    def claimed_modes(cls) -> tuple[str, ...]:
        """The modes the claims are about: the server's (:attr:`server_modes`) where the server
        decides, the backend's durability modes otherwise."""
        return cls.server_modes or cls.durability_modes

    @classmethod
    def claim_of(cls, mode: str, medium: str | None = None) -> Claim:
        """What ``mode`` promises with the data on ``medium`` (default: the first of
        :attr:`media`); :func:`no_claim` for a mode that declares none."""
        return (cls.medium_claims.get(medium or "", {}).get(mode) or cls.claims.get(mode)
                or no_claim(mode))

    @classmethod
    def claim_medium(cls, mode: str) -> str:
        """The medium ``mode`` is audited on unless told: the one :attr:`mode_media` names for
        it (HBase's ``wal_hsync``: HDFS, where an hsync is an fsync), else the first of
        :attr:`media`."""
        return cls.mode_media.get(mode) or (cls.media[0] if cls.media else "")

    @classmethod
    def server_media(cls) -> tuple[str, ...]:
        """The media a server backend's server can be started on, when it has a choice (a
        crash audit's ``--hbase-root``); empty for every other backend."""
        return cls.media if cls.kind == "server" and len(cls.media) > 1 else ()

    @classmethod
    def hazard_options(cls, rnd: random.Random, hazard: bool) -> dict[str, Any]:
        """Options a crash audit opens the store with so that its hazards (rotation, compaction,
        snapshots: its fail points) come up often; ``hazard``: the round is armed at one of
        them.  Options a round may vary are drawn from ``rnd``.  None by default."""
        return {}

    # -- options --------------------------------------------------------------------------
    @classmethod
    def all_options(cls) -> dict[str, Option]:
        opts = {
            "durability": Option(
                str,
                cls.durability_modes[0],
                "how durable a write is when put() returns",
                cls.durability_modes,
            )
        }
        opts.update(cls.options)
        return opts

    @classmethod
    def parse_options(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``given`` against the declared options and fill in defaults."""
        declared = cls.all_options()
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise BadOptionError(
                f"backend {cls.name!r} has no option {', '.join(map(repr, unknown))}; "
                f"valid options: {', '.join(sorted(declared))}"
            )
        config = {}
        for key, opt in declared.items():
            value = given.get(key, opt.default)
            config[key] = opt.convert(cls.name, key, value)
        return config

    # -- context manager ------------------------------------------------------------------
    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- guards ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"backend {self.name!r}: the store is closed")

    @staticmethod
    def _check_key(key: str) -> None:
        if type(key) is not str:
            raise TypeError(f"checkpoint keys are str, not {type(key).__name__}")
        if not key:
            raise ValueError("checkpoint keys must not be empty")

    @staticmethod
    def _check_value(value: bytes) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"checkpoint values are bytes, not {type(value).__name__}")

    def _too_large(self, key: str, size: int) -> None:
        raise ValueTooLargeError(
            f"backend {self.name!r}: the value of {key!r} is {size} bytes, more than the "
            f"{self.max_value_bytes} bytes ({_binary_size(self.max_value_bytes)}) its format "
            f"can carry; nothing was written — split the checkpoint into smaller values")

    def _enter(self) -> None:
        """Start a public operation: put its in-flight token down, *then* check that the store
        is open (this order is what makes ``close()`` safe; see the module docstring).  The
        operation ends with ``self._inflight.pop()`` in a ``finally``."""
        inflight = self._inflight
        inflight.append(None)
        if self._closed:
            inflight.pop()
            self._check_open()

    def _operation(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` as a public operation: between :meth:`_enter` and the token's pop."""
        self._enter()
        try:
            return fn(*args)
        finally:
            self._inflight.pop()

    # -- public API -----------------------------------------------------------------------
    def put(self, key: str, value: bytes) -> None:
        """Store ``value`` as the latest checkpoint of ``key``; durable per ``durability``."""
        # _enter and the checks of _check_key/_check_value, inlined: this is every backend's
        # hottest call and each method call costs a measurable share of a tmpfs-speed put
        inflight = self._inflight
        inflight.append(None)
        try:
            if self._closed:
                self._check_open()
            if type(key) is not str or not key:
                self._check_key(key)
            if type(value) is not bytes:
                self._check_value(value)
                value = bytes(value)
            if len(value) > self.max_value_bytes:
                self._too_large(key, len(value))
            self._put(key, value)
        finally:
            inflight.pop()

    def get(self, key: str) -> bytes | None:
        """The latest checkpoint of ``key``, or ``None``."""
        self._enter()
        try:
            self._check_key(key)
            return self._get(key)
        finally:
            self._inflight.pop()

    def delete(self, key: str) -> None:
        """Forget ``key`` (no error if it is absent)."""
        self._enter()
        try:
            self._check_key(key)
            self._delete(key)
        finally:
            self._inflight.pop()

    def delete_many(self, keys: Iterable[str]) -> None:
        """Forget several keys (absent ones are no error); durable as a whole when it returns,
        as ``delete`` is per key.  Every key is checked before anything is deleted; above the
        backend's batch limits (keys count as their bytes) the keys reach the store as several
        ``_delete_many`` calls, in order (a failure part-way leaves the earlier calls' deletes
        done, unacknowledged as a whole)."""
        self._enter()
        try:
            keys = list(keys)
            for key in keys:
                self._check_key(key)
            for start, end in self._batches([len(key) for key in keys]):
                self._delete_many(keys[start:end])
        finally:
            self._inflight.pop()

    def put_many(self, items: Iterable[tuple[str, bytes]] | Mapping[str, bytes]) -> None:
        """Store several checkpoints; durable as a whole when it returns.  A batch above the
        backend's batch limits reaches the store as several ``_put_many`` calls, in order (a
        failure part-way leaves the earlier calls' writes stored, unacknowledged as a whole)."""
        self._enter()
        try:
            pairs = list(items.items() if isinstance(items, Mapping) else items)
            sizes = []
            limit, converted = self.max_value_bytes, False
            for key, value in pairs:  # the checks of put(), inlined: a checkpoint has 10^6 pairs
                if type(key) is not str or not key:
                    self._check_key(key)
                if type(value) is bytes:
                    size = len(value)
                else:
                    self._check_value(value)
                    size = value.nbytes if isinstance(value, memoryview) else len(value)
                    converted = True
                if size > limit:
                    self._too_large(key, size)
                sizes.append(size + len(key))
            plain = _plain_bytes if self.takes_buffers else bytes
            for start, end in self._batches(sizes):
                part = pairs if (start, end) == (0, len(pairs)) else pairs[start:end]
                self._put_many([(k, plain(v)) for k, v in part] if converted else part)
        finally:
            self._inflight.pop()

    def _batches(self, sizes: list[int]) -> Iterator[tuple[int, int]]:
        """``[start, end)`` ranges of a batch, in order, each within :attr:`max_batch_items` and
        :attr:`max_batch_bytes` (an item larger than the byte limit alone goes by itself).  In
        order, so a key given twice keeps its last value, as with sequential puts."""
        if not sizes:
            return  # nothing to store: no call at all
        if len(sizes) <= self.max_batch_items and sum(sizes) <= self.max_batch_bytes:
            yield 0, len(sizes)  # the common case, on every batch's path: one call, no walk
            return
        start, total = 0, 0
        for i, size in enumerate(sizes):
            if i > start and (i - start >= self.max_batch_items
                              or total + size > self.max_batch_bytes):
                yield start, i
                start, total = i, 0
            total += size
        if start < len(sizes):
            yield start, len(sizes)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The checkpoints of those ``keys`` that exist (absent keys are left out)."""
        self._enter()
        try:
            keys = list(keys)
            for key in keys:
                self._check_key(key)
            return self._get_many(keys)
        finally:
            self._inflight.pop()

    def scan(self, prefix: str = "") -> Iterator[tuple[str, bytes]]:
        """Every ``(key, value)`` whose key starts with ``prefix``, ordered by key.  Each step of
        the iterator is an operation of its own: one still being read when ``close()`` begins
        raises :class:`StoreClosedError` at its next step instead of reading a closed store."""
        self._enter()
        try:
            _check_prefix(prefix, "scan")
            steps = self._scan(prefix)
        finally:
            self._inflight.pop()
        return self._stepwise(steps)

    def keys(self, prefix: str = "") -> list[str]:
        """Every key starting with ``prefix``, ordered, without reading a value: what deleting
        a namespace needs (a server lists its keys; the base answer walks :meth:`scan`)."""
        _check_prefix(prefix, "key")
        return sorted(self._operation(self._keys, prefix))

    # -- records of fields (stores with ``record_fields``) ---------------------------------
    def put_fields(self, key: str, fields: Mapping[str, bytes]) -> None:
        """Set these fields of ``key``'s record, creating the record when there is none; its
        other fields are kept (YCSB's update of some fields).  Durable per ``durability``, as
        ``put``.  At least one field; names are non-empty ``str``."""
        self._enter_record(key)
        try:
            self._put_fields(key, self._checked_fields(key, fields))
        finally:
            self._inflight.pop()

    def put_fields_many(self, items: Iterable[tuple[str, Mapping[str, bytes]]]) -> None:
        """``put_fields`` of several records; durable as a whole when it returns, split into
        several ``_put_fields_many`` calls above the batch limits as ``put_many`` is."""
        self._enter()
        try:
            self._check_fields_store()
            records = []
            for key, fields in items:
                self._check_key(key)
                records.append((key, self._checked_fields(key, fields)))
            sizes = [len(key) + sum(len(n) + len(v) for n, v in fields.items())
                     for key, fields in records]
            for start, end in self._batches(sizes):
                self._put_fields_many(records[start:end])
        finally:
            self._inflight.pop()

    def get_fields(self, key: str, names: Sequence[str] | None = None) -> dict[str, bytes] | None:
        """``key``'s record: every field, or with ``names`` those of them it has; ``None``
        when there is no record (with ``names``: when it has none of them)."""
        self._enter_record(key)
        try:
            if names is not None:
                names = list(names)
                if not names:
                    raise ValueError("get_fields: names must name at least one field "
                                     "(None reads them all)")
                for name in names:
                    self._check_field_name(name)
            return self._get_fields(key, names)
        finally:
            self._inflight.pop()

    def scan_fields(self, prefix: str = "") -> Iterator[tuple[str, dict[str, bytes]]]:
        """Every ``(key, record)`` whose key starts with ``prefix``, ordered by key, each
        record with all its fields; keys holding a value (``put``) are not records and are
        left out, as :meth:`scan` leaves records out.  Stepwise, as :meth:`scan`."""
        self._enter()
        try:
            self._check_fields_store()
            _check_prefix(prefix, "scan")
            steps = self._scan_fields(prefix)
        finally:
            self._inflight.pop()
        return self._stepwise(steps)

    def _enter_record(self, key: str) -> None:
        """:meth:`_enter` for an operation on ``key``'s record: the token down, then the store
        open, keeping records of fields, and ``key`` a key; on any failure the token is taken
        back before the typed error is raised.  One test on the common path (a record
        operation is every update's call)."""
        inflight = self._inflight
        inflight.append(None)
        if self._closed or not self.record_fields or type(key) is not str or not key:
            inflight.pop()
            self._check_open()
            self._check_fields_store()
            self._check_key(key)

    def _check_fields_store(self) -> None:
        if not self.record_fields:
            raise NoFieldsError(
                f"backend {self.name!r} keeps one value per key, not a record of fields; "
                f"check record_fields first and encode the record into one value")

    @staticmethod
    def _check_field_name(name: str) -> None:
        if type(name) is not str or not name:
            raise TypeError(f"field names are non-empty str, not {name!r}")

    def _checked_fields(self, key: str, fields: Mapping[str, bytes]) -> dict[str, bytes]:
        """``fields`` as a plain dict of ``str`` -> ``bytes``, checked: what a primitive gets
        (a dict that already is one is passed on as it is, not copied)."""
        if type(fields) is dict and fields:
            limit = self.max_value_bytes
            for name, value in fields.items():
                if type(name) is not str or not name or type(value) is not bytes \
                        or len(value) > limit:
                    break
            else:
                return fields
        if not isinstance(fields, Mapping):
            raise TypeError(f"a record is a mapping of field name to bytes, not "
                            f"{type(fields).__name__}")
        if not fields:
            raise ValueError(f"the record of {key!r} has no field; give at least one")
        out = {}
        for name, value in fields.items():
            self._check_field_name(name)
            if type(value) is not bytes:
                self._check_value(value)
                value = bytes(value)
            if len(value) > self.max_value_bytes:
                self._too_large(f"{key}/{name}", len(value))
            out[name] = value
        return out

    def _stepwise(self, steps: Iterator[tuple[str, bytes]]) -> Iterator[tuple[str, bytes]]:
        """``steps``, each ``next`` of it run as an operation (see :meth:`scan`)."""
        while True:
            self._enter()
            try:
                item = next(steps, None)
            finally:
                self._inflight.pop()
            if item is None:
                return
            yield item

    def flush(self) -> None:
        """Make every acknowledged write durable now, whatever the durability mode."""
        self._operation(self._flush)

    def close(self) -> None:
        """Flush and release resources.  Safe while other threads use the store: operations
        that start from now on raise :class:`StoreClosedError`, those already running end
        first (waiting at most :data:`CLOSE_DRAIN_S`), then the backend's ``_close`` runs.
        Idempotent: a second call, also one made while the first runs, waits for the first
        and returns; whatever the first raised is not raised again."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._drain()
            self._close()

    def _drain(self) -> None:
        """Wait (polling, bounded by :data:`CLOSE_DRAIN_S`) until no operation is in flight."""
        deadline = time.monotonic() + CLOSE_DRAIN_S
        pause = 0.0001
        while self._inflight and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def footprint(self, prefix: str = "") -> int | None:
        """Bytes the store holds now for its keys under ``prefix`` (its files, its objects, or
        the server's memory for them): space amplification is this over the live data's bytes.
        ``None`` where the store cannot attribute bytes (the base answer, and a directory store
        asked for a prefix: its files mix every key's records)."""
        if prefix and self.keeps_a_directory():
            return None
        return self._operation(self._footprint, prefix)

    def reclaim(self) -> None:
        """Collect garbage now (what the store otherwise does in the background or never):
        the space a measurement of ``footprint()`` "after GC" expects to be given back."""
        self._operation(self._reclaim)

    def stats(self) -> dict[str, Any]:
        """What this store is and did: backend name, durability, backend-specific counters, and
        its request ledger (``ledger``: :meth:`requests` as :meth:`.Ledger.as_dict` gives it)."""
        out: dict[str, Any] = {"backend": self.name, "durability": self.durability}
        out.update(self._stats())
        out["ledger"] = self.requests().as_dict()
        return out

    def requests(self) -> Ledger:
        """The requests this store sent since it was opened (a copy): :attr:`ledger`, plus what
        the store counts elsewhere (:meth:`_requests`: a committer's syncs issued in C)."""
        return self._requests(self.ledger.snapshot())

    # -- primitives -----------------------------------------------------------------------
    @abc.abstractmethod
    def _put(self, key: str, value: bytes) -> None: ...

    @abc.abstractmethod
    def _get(self, key: str) -> bytes | None: ...

    @abc.abstractmethod
    def _delete(self, key: str) -> None: ...

    @abc.abstractmethod
    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]: ...

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        for key, value in items:
            self._put(key, value)

    def _delete_many(self, keys: list[str]) -> None:
        """One delete per key: a store without a batch delete of its own."""
        for key in keys:
            self._delete(key)

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        out = {}
        for key in keys:
            value = self._get(key)
            if value is not None:
                out[key] = value
        return out

    def _put_fields(self, key: str, fields: dict[str, bytes]) -> None:
        raise NoFieldsError(f"backend {self.name!r} declares record_fields but has no _put_fields")

    def _put_fields_many(self, records: list[tuple[str, dict[str, bytes]]]) -> None:
        for key, fields in records:
            self._put_fields(key, fields)

    def _get_fields(self, key: str, names: list[str] | None) -> dict[str, bytes] | None:
        raise NoFieldsError(f"backend {self.name!r} declares record_fields but has no _get_fields")

    def _scan_fields(self, prefix: str) -> Iterator[tuple[str, dict[str, bytes]]]:
        raise NoFieldsError(f"backend {self.name!r} declares record_fields but has no _scan_fields")

    def _flush(self) -> None:
        pass

    def _close(self) -> None:
        pass

    def _stats(self) -> dict[str, Any]:
        return {}

    def _footprint(self, prefix: str) -> int | None:
        return None

    def _requests(self, counted: Ledger) -> Ledger:
        """``counted`` (a copy of :attr:`ledger`) with what the store counts outside it."""
        return counted

    def _keys(self, prefix: str) -> list[str]:
        return [key for key, _ in self._scan(prefix)]

    def _reclaim(self) -> None:
        """Nothing by default: a server frees a key's space when it is deleted (Redis at once,
        MinIO with the object); LMDB reuses freed pages in place; SQLite's WAL is folded back at
        its own checkpoints."""


# ------------------------------------------------------------------------- retry with backoff
@dataclass
class Retry:
    """Bounded retry with exponential backoff and jitter, for networked backends.

    Only exceptions in ``retry_on`` are retried; after ``attempts`` tries (or ``deadline``
    seconds) the last error is raised as :class:`BackendUnavailableError` naming ``what``.
    Each retry and its wait are counted in ``ledger`` (the store's, :mod:`.ledger`) when given.
    """

    attempts: int = 5
    base_delay: float = 0.05
    max_delay: float = 1.0
    deadline: float = 10.0
    retry_on: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    ledger: Ledger | None = field(default=None, repr=False)

    def call(self, what: str, fn: Callable[[], T], *, started: float | None = None,
             tried: int = 0, last: BaseException | None = None) -> T:
        """``fn()`` until it succeeds or the bounds are reached.  A caller that already made
        ``tried`` attempts of its own since ``started`` (``time.monotonic()``) passes them on, so
        the bounds cover those too, and ``last``, the failure of its latest attempt: reported as
        is when those attempts used up the budget (``retries=0``)."""
        start = time.monotonic() if started is None else started
        if tried >= self.attempts:
            spent = time.monotonic() - start
            raise BackendUnavailableError(
                f"{what} failed after {tried} attempts in {spent:.1f}s: {last}") from last
        delay = self.base_delay
        for attempt in range(1 + tried, self.attempts + 1):
            try:
                return fn()
            except self.retry_on as exc:
                spent = time.monotonic() - start
                if attempt == self.attempts or spent + delay > self.deadline:
                    raise BackendUnavailableError(
                        f"{what} failed after {attempt} attempts in {spent:.1f}s: {exc}"
                    ) from exc
                wait = delay * (0.5 + random.random() / 2)
                if self.ledger is not None:
                    self.ledger.retried(wait)
                self.sleep(wait)
                delay = min(delay * 2, self.max_delay)
        raise AssertionError("unreachable")
