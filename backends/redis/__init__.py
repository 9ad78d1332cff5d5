"""``redis``: one Redis string per checkpoint, ``SET``/``GET`` under a key prefix (as in S4).

A record of fields (``record_fields``: :meth:`~backends.base.Backend.put_fields` and the rest)
is one Redis hash under the same key, as YCSB's Redis binding keeps a record: ``HSET`` of the
given fields, ``HGETALL`` (or ``HMGET`` of the asked fields) to read, so a one-field update
sends that field alone.  A key holds one model: ``GET`` of a hash, or a field operation on a
string, is refused by the server (``WRONGTYPE``) and raised as
:class:`~backends.base.RecordModelError`; ``put`` replaces whatever the key held, as ``SET``
does.  The value scan (``MGET``) leaves hashes out, and the record scan leaves strings out.

Durability is a *server* setting in Redis (the AOF ``appendfsync`` policy: ``always`` fsyncs before
replying, ``everysec`` about once a second, ``no`` leaves it to the OS), so the backend declares one
mode, ``server``: a put is as durable as the server's policy makes it.  ``stats()`` reports the
server's real ``appendonly``/``appendfsync`` (``CONFIG GET``) so every result says what was
measured; ``require_appendfsync=always`` makes ``open`` fail if the server runs another policy.
Choose the policy with ``bench services up redis --durability always|everysec|no``.

``flush()`` is a real barrier: nothing under ``always``; ``WAITAOF`` on Redis >= 7.2; under
``everysec`` on older servers, a wait until the server's once-a-second background fsync has covered
this client's last write (2 s after it, Redis' documented bound, and no background fsync pending);
under ``no`` (or AOF off), an AOF rewrite (``BGREWRITEAOF``, which fsyncs a complete new AOF) and a
wait for it to finish.  The rewrite costs time proportional to the dataset, so runs that flush
often belong on ``always`` or ``everysec``.

Every call is bounded: socket timeouts (a dead or stopped server never hangs a caller) and
:class:`backends.base.Retry` (``retries`` retries with backoff within ``timeout`` seconds); the
final failure is a :class:`BackendUnavailableError` naming ``host:port`` and the fix.

The per-key commands (``SET``, ``GET``, ``DEL``, ``MSET``, ``MGET``) go over a socket each thread
keeps (:class:`_Wire`): the command packed by :func:`resp`, one ``sendall``, the reply parsed by
hiredis' ``Reader``.  redis-py's ``Redis.set`` adds a pool checkout, its own retry wrapper and
reply callbacks to every call, and even its ``Connection`` layer adds health checks and error
mapping; this way a put costs what a bare Python socket loop costs (``bench peer`` compares it
with ``redis-benchmark``).  Everything else (``SCAN``, ``INFO``, ``CONFIG``, ``WAIT``, the flush
barrier) uses redis-py.  Failures take the bounded retry path above.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, Iterator, TypeVar

import hiredis
import redis

from ..base import (
    LONGEST_WAIT_S,
    Backend,
    BackendUnavailableError,
    Claim,
    Option,
    RecordModelError,
    Retry,
    StorageFullError,
)
from ..ledger import Ledger

T = TypeVar("T")

_GLOB_CHARS = b"\\*?[]"
_pack = hiredis.pack_command
_SCAN_BATCH = 1000
MiB = 1024 * 1024


def glob_escape(raw: bytes) -> bytes:
    """Escape Redis glob metacharacters so ``raw`` matches only itself in ``SCAN MATCH``."""
    out = bytearray()
    for byte in raw:
        if byte in _GLOB_CHARS:
            out += b"\\"
        out.append(byte)
    return bytes(out)


def _encode(key: str) -> bytes:
    # surrogatepass: any Python str is a valid key, and byte order still follows code points
    return key.encode("utf-8", "surrogatepass")


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def resp(*args: bytes) -> bytes:
    """A command in RESP, the Redis wire format (an array of bulk strings), as one buffer for
    one ``sendall``, packed by hiredis in C.  redis-py's Python-level ``pack_command`` does the
    same with per-argument type checks that cost a noticeable share of a small ``SET``'s round
    trip; our arguments are bytes."""
    return _pack(args)


class _Wire:
    """One thread's connection for the per-key commands: a socket and a reply parser; every
    command it sends is counted in ``ledger`` (the store's) with the bytes each way."""

    __slots__ = ("sock", "reader", "ledger")

    def __init__(self, host: str, port: int, timeout: float, password: str | None, db: int,
                 ledger: Ledger) -> None:
        self.ledger = ledger
        self.sock = socket.create_connection((host, port), timeout=timeout)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.reader = hiredis.Reader()
            if password:
                self.expect_ok(self.call(resp(b"AUTH", password.encode()), "AUTH"))
            if db:
                self.expect_ok(self.call(resp(b"SELECT", str(db).encode()), "SELECT"))
        except BaseException:
            self.sock.close()
            raise

    def call(self, packed: bytes, name: str, count: int | None = None) -> Any:
        """Send one packed command (``name``: its command, for the ledger) and return its reply
        (a ``hiredis.ReplyError`` is returned, not raised, as the parser gives it); with
        ``count``, ``count`` commands packed in one buffer (a pipeline: one round trip) and the
        list of their replies, in order."""
        got = 0
        replies: list[Any] = []
        try:
            self.sock.sendall(packed)
            reader = self.reader
            while True:
                reply = reader.gets()
                if reply is False:
                    chunk = self.sock.recv(65536)
                    if not chunk:
                        raise redis.ConnectionError("the server closed the connection")
                    got += len(chunk)
                    reader.feed(chunk)
                elif count is None:
                    return reply
                else:
                    replies.append(reply)
                    if len(replies) == count:
                        return replies
        finally:  # sent (or tried): requests on the wire, answered or not
            self.ledger.record_shared(name, len(packed), got, count or 1)

    @staticmethod
    def expect_ok(reply: Any) -> None:
        """Raise a server error reply as redis-py's ``ResponseError``."""
        if isinstance(reply, hiredis.ReplyError):
            raise redis.ResponseError(str(reply))

    def close(self) -> None:
        self.sock.close()


#: the per-key commands' names as the ledger counts them (no decode on a put's path)
_NAMES = {b"SET": "SET", b"GET": "GET", b"DEL": "DEL", b"MSET": "MSET", b"MGET": "MGET",
          b"HSET": "HSET", b"HGETALL": "HGETALL", b"HMGET": "HMGET"}

#: the server's reply to a command on a key of the other type (a hash read with GET ...)
_WRONGTYPE = "WRONGTYPE"


def _hset(raw_key: bytes, fields: dict[str, bytes]) -> list[bytes]:
    """The ``HSET`` command setting ``fields`` of the hash ``raw_key``."""
    args = [b"HSET", raw_key]
    for name, value in fields.items():
        args += (name.encode("utf-8", "surrogatepass"), value)
    return args


def _record(reply: list[bytes]) -> dict[str, bytes]:
    """An ``HGETALL`` reply (name, value, name, value ...) as a record."""
    pairs = iter(reply)
    return {name.decode("utf-8", "surrogatepass"): value for name, value in zip(pairs, pairs)}


def _command_name(first: Any) -> str:
    """A command's name as the ledger counts it: ``CONFIG GET`` -> ``CONFIG``."""
    text = first.decode() if isinstance(first, (bytes, bytearray)) else str(first)
    return text.split(" ", 1)[0].upper()


class _Counted:
    """Mixed into redis-py's connection class: every command it sends (one, or each of a
    pipeline's, ``MULTI``/``EXEC`` included; packed as redis-py's own ``send_command`` packs
    it) is counted in ``ledger`` with its bytes.
    The replies' bytes are not counted on this path (redis-py reads them in its parser)."""

    ledger: Ledger

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        packed = self._command_packer.pack(*args)  # type: ignore[attr-defined]
        self.ledger.record_shared(_command_name(args[0]), sum(len(p) for p in packed))
        self.send_packed_command(packed, check_health=kwargs.get("check_health", True))  # type: ignore[attr-defined]

    def pack_commands(self, commands: Any) -> list:
        commands = list(commands)
        out = super().pack_commands(commands)  # type: ignore[misc]
        sent = sum(len(p) for p in out)  # the whole pipeline's, on its first command
        for cmd in commands:
            self.ledger.record_shared(_command_name(cmd[0]), sent)
            sent = 0
        return out


class RedisBackend(Backend):
    name = "redis"
    kind = "server"
    durability_modes = ("server",)
    #: the server's ``appendfsync`` policies, which decide what a put promises
    server_modes = ("always", "everysec", "no")
    claims = {
        "always": Claim("always", "appendfsync always: the AOF is fsync'ed before each reply; no "
                        "acknowledged write may be lost", crash_safe=True, power_safe=True),
        "everysec": Claim("everysec", "appendfsync everysec: the AOF is fsync'ed once a second; a "
                          "power cut may lose about the last second of acknowledged writes",
                          crash_safe=True, power_safe=False),
        "no": Claim("no", "appendfsync no: the OS decides when the AOF reaches the disk; a power "
                    "cut may lose any acknowledged write", crash_safe=True, power_safe=False),
    }
    audit_mode = "always"
    audit_run_seconds = 1.0
    record_fields = True
    #: a string is at most 512 MiB (the server's ``proto-max-bulk-len``, 512mb by default)
    max_value_bytes = 512 * MiB
    #: one ``MSET`` is one command, read whole into the client's query buffer, which the server
    #: caps at 1 GiB (``client-query-buffer-limit``, 1gb by default): a batch stays at half of it,
    #: and at a pipeline size that keeps one reply's wait short
    max_batch_bytes = 512 * MiB
    max_batch_items = 10_000
    options = {
        "host": Option(str, "127.0.0.1", "Redis server host"),
        "port": Option(int, 6379, "Redis server port", min=1, max=65535),
        "db": Option(int, 0, "logical database number", min=0),
        "password": Option(str, None, "AUTH password (none by default)"),
        "prefix": Option(str, "ckpt:", "prefix of every key this store writes"),
        "timeout": Option(float, 5.0, "socket timeout and retry deadline, seconds",
                          min=0, min_exclusive=True, max=LONGEST_WAIT_S),
        "retries": Option(int, 3, "retries (with backoff) of a failed call before giving up",
                          min=0),
        "wait_replicas": Option(int, 0, "after writes, WAIT until this many replicas have them",
                                min=0),
        "require_appendfsync": Option(
            str, "", "fail at open unless the server's appendfsync is this policy",
            ("", "always", "everysec", "no"),
        ),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        cfg = self.config
        self.address = f"{cfg['host']}:{cfg['port']}"
        self._prefix = _encode(cfg["prefix"])
        self._retry = Retry(
            attempts=cfg["retries"] + 1, deadline=cfg["timeout"],
            retry_on=(redis.ConnectionError, redis.TimeoutError, OSError), ledger=self.ledger,
        )
        self._client = redis.Redis(
            host=cfg["host"], port=cfg["port"], db=cfg["db"], password=cfg["password"],
            socket_timeout=cfg["timeout"], socket_connect_timeout=cfg["timeout"],
            retry=None,  # our own bounded Retry is the only retry loop
        )
        pool = self._client.connection_pool  # no connection made yet: each one will count
        pool.connection_class = type("CountedConnection", (_Counted, pool.connection_class),
                                     {"ledger": self.ledger})
        self._local = threading.local()  # .wire: this thread's connection (see _command)
        self._wires: list[_Wire] = []  # every thread's, closed by close()
        self._conns_lock = threading.Lock()
        self._server: dict[str, Any] = {}
        self._last_write: float | None = None  # monotonic time of the last write (flush waits on it)
        try:
            self._server = self._server_settings()
        except BaseException:
            self._client.close()
            raise
        wanted = cfg["require_appendfsync"]
        actual = self._server.get("appendfsync")
        if wanted and (actual != wanted or self._server.get("appendonly") != "yes"):
            self._client.close()
            raise BackendUnavailableError(
                f"backend 'redis': server {self.address} runs appendonly="
                f"{self._server.get('appendonly')} appendfsync={actual}, but "
                f"require_appendfsync={wanted}; restart it with "
                f"`bench services up redis --durability {wanted}`"
            )

    # -- plumbing ---------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T], started: float | None = None,
              tried: int = 0, last: BaseException | None = None) -> T:
        """Run ``fn`` with bounded retries; every failure becomes a typed error naming the fix."""
        try:
            return self._retry.call(f"redis {what} at {self.address}", fn, started=started,
                                    tried=tried, last=last)
        except BackendUnavailableError as exc:
            raise BackendUnavailableError(
                f"{exc}; is the server running? start it with `bench services up redis`"
            ) from exc.__cause__
        except redis.ResponseError as exc:
            text = str(exc)
            if text.startswith(_WRONGTYPE):
                raise RecordModelError(
                    f"redis at {self.address} {what}: the key holds the other record model (a "
                    f"value written by put, or a record of fields); read it the way it was "
                    f"written, e.g. load and run with the same record model") from exc
            if text.startswith("OOM") or "No space left" in text:
                raise StorageFullError(f"redis at {self.address}: {text}") from exc
            raise BackendUnavailableError(f"redis at {self.address} {what}: {text}") from exc
        except redis.RedisError as exc:
            raise BackendUnavailableError(f"redis at {self.address} {what}: {exc}") from exc

    def _server_settings(self) -> dict[str, Any]:
        def fetch() -> dict[str, Any]:
            version = self._client.info("server").get("redis_version", "")
            conf = self._client.config_get("append*")
            return {
                "version": version,
                "appendonly": conf.get("appendonly"),  # redis-py decodes CONFIG GET replies
                "appendfsync": conf.get("appendfsync"),
            }

        return self._call("CONFIG GET", fetch)

    def _k(self, key: str) -> bytes:
        return self._prefix + _encode(key)

    def _wire(self) -> _Wire:
        cfg = self.config
        wire = _Wire(cfg["host"], cfg["port"], cfg["timeout"], cfg["password"], cfg["db"],
                     self.ledger)
        with self._conns_lock:
            self._wires.append(wire)
        self._local.wire = wire
        return wire

    def _drop_wire(self, wire: _Wire) -> None:
        """Forget a broken connection (the next command opens a new one)."""
        wire.close()
        self._local.wire = None
        with self._conns_lock:
            if wire in self._wires:
                self._wires.remove(wire)

    def _command(self, *args: bytes) -> Any:
        """One command on this thread's connection (see the module notes); on any failure the
        bounded retry path takes over, counting this first attempt.  The first attempt is written
        out here rather than calling :meth:`_again`: this is every put's path, and the extra
        method call and closure show in a small ``SET``'s latency."""
        wire = getattr(self._local, "wire", None)
        try:
            reply = (wire or self._wire()).call(resp(*args), _NAMES.get(args[0]) or args[0].decode())
        except (OSError, redis.RedisError, hiredis.ProtocolError) as exc:
            if wire is not None:
                self._drop_wire(wire)
            return self._call(args[0].decode(), lambda: self._again(args), time.monotonic(), 1,
                              last=exc)
        if isinstance(reply, hiredis.ReplyError):  # a server error: typed by _call, not retried
            error = redis.ResponseError(str(reply))
            return self._call(args[0].decode(), lambda: self._raise(error))
        return reply

    def _again(self, args: tuple) -> Any:
        reply = self._attempt(lambda wire: wire.call(resp(*args),
                                                     _NAMES.get(args[0]) or args[0].decode()))
        _Wire.expect_ok(reply)  # a server error: not retried, typed by _call
        return reply

    def _attempt(self, send: Callable[[_Wire], T]) -> T:
        """``send(wire)`` on this thread's connection; a broken connection is dropped (the
        next attempt opens a new one) and its failure raised for the retry path."""
        wire = getattr(self._local, "wire", None) or self._wire()
        try:
            return send(wire)
        except (OSError, redis.RedisError, hiredis.ProtocolError) as exc:
            self._drop_wire(wire)
            if isinstance(exc, hiredis.ProtocolError):
                raise redis.ConnectionError(f"protocol error: {exc}") from exc
            raise

    def _pipelined(self, name: str, commands: list[Any],
                   allowed: str | None = None) -> list[Any]:
        """``commands`` in one round trip, with the bounded retry path; their replies.  An
        error reply raises (typed by :meth:`_call`), except one starting with ``allowed``,
        which is returned in its place.  Every command here may be sent twice (a retry after
        a lost reply): they set or read, and setting again sets the same."""
        packed = b"".join([resp(*c) for c in commands])

        def attempt() -> list[Any]:
            replies = self._attempt(lambda wire: wire.call(packed, name, len(commands)))
            for reply in replies:
                if not (allowed and isinstance(reply, hiredis.ReplyError)
                        and str(reply).startswith(allowed)):
                    _Wire.expect_ok(reply)
            return replies

        return self._call(name, attempt)

    @staticmethod
    def _raise(exc: BaseException) -> Any:
        raise exc

    def _after_write(self) -> None:
        self._last_write = time.monotonic()
        n = self.config["wait_replicas"]
        if n:
            # WAIT blocks for 80 % of the socket timeout, so its own reply arrives before that
            wait_ms = max(1, int(self.config["timeout"] * 800))
            got = self._call("WAIT", lambda: self._client.wait(n, wait_ms))
            if got < n:
                raise BackendUnavailableError(
                    f"redis at {self.address}: only {got} of {n} replicas acknowledged the write "
                    f"within {wait_ms} ms; check the replicas or lower wait_replicas"
                )

    # -- primitives -------------------------------------------------------------------------
    def _put(self, key: str, value: bytes) -> None:
        self._command(b"SET", self._prefix + _encode(key), value)
        self._after_write()

    def _get(self, key: str) -> bytes | None:
        return self._command(b"GET", self._prefix + _encode(key))

    def _delete(self, key: str) -> None:
        self._command(b"DEL", self._k(key))
        self._after_write()

    def _delete_many(self, keys: list[str]) -> None:
        """One ``DEL`` of every key (at most ``max_batch_items`` of them, by the base class)."""
        self._command(b"DEL", *map(self._k, keys))
        self._after_write()

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        args: list[bytes] = [b"MSET"]  # MSET sets in order: the last value of a repeated key wins
        k = self._k
        for key, value in items:
            args += (k(key), value)
        self._command(*args)
        self._after_write()

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        values = self._command(b"MGET", *map(self._k, keys))
        return {k: v for k, v in zip(keys, values) if v is not None}

    def _put_fields(self, key: str, fields: dict[str, bytes]) -> None:
        self._command(*_hset(self._prefix + _encode(key), fields))
        self._after_write()

    def _put_fields_many(self, records: list[tuple[str, dict[str, bytes]]]) -> None:
        """One ``HSET`` per record, all in one round trip."""
        self._pipelined("HSET", [_hset(self._k(key), fields) for key, fields in records])
        self._after_write()

    def _get_fields(self, key: str, names: list[str] | None) -> dict[str, bytes] | None:
        if names is None:
            reply = self._command(b"HGETALL", self._prefix + _encode(key))
            return _record(reply) if reply else None
        values = self._command(b"HMGET", self._prefix + _encode(key), *map(_encode, names))
        return {name: v for name, v in zip(names, values) if v is not None} or None

    def _scan_fields(self, prefix: str) -> Iterator[tuple[str, dict[str, bytes]]]:
        found = self._raw_keys(prefix)
        cut = len(self._prefix)
        for start in range(0, len(found), _SCAN_BATCH):
            batch = found[start:start + _SCAN_BATCH]
            replies = self._pipelined("HGETALL", [(b"HGETALL", raw) for raw in batch],
                                      allowed=_WRONGTYPE)
            for raw, reply in zip(batch, replies):
                if isinstance(reply, list) and reply:  # not a value, not deleted since the SCAN
                    yield _decode(raw[cut:]), _record(reply)

    def _raw_keys(self, prefix: str) -> list[bytes]:
        """The server's names of this store's keys under ``prefix``, each once, ordered (one
        ``SCAN`` walk; a key renamed during it may be reported twice, hence the set)."""
        pattern = glob_escape(self._k(prefix)) + b"*"
        return sorted(self._call("SCAN", lambda: set(self._client.scan_iter(match=pattern, count=_SCAN_BATCH))))

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        found = self._raw_keys(prefix)
        cut = len(self._prefix)
        for start in range(0, len(found), _SCAN_BATCH):
            batch = found[start:start + _SCAN_BATCH]
            values = self._call("MGET", lambda b=batch: self._client.mget(b))
            for raw, value in zip(batch, values):
                if value is not None:  # deleted since the SCAN, or a record of fields
                    yield _decode(raw[cut:]), value

    def _keys(self, prefix: str) -> list[str]:
        return [_decode(raw[len(self._prefix):]) for raw in self._raw_keys(prefix)]

    def _footprint(self, prefix: str) -> int:
        """The server memory its keys use (``MEMORY USAGE``, key and value with Redis' own
        overhead, pipelined per batch): Redis holds every checkpoint in memory, and its AOF
        on disk is the server's, shared by every store on it."""
        keys = self._raw_keys(prefix)
        total = 0
        for start in range(0, len(keys), _SCAN_BATCH):
            def usage(batch: list[bytes] = keys[start:start + _SCAN_BATCH]) -> list[Any]:
                pipe = self._client.pipeline(transaction=False)
                for key in batch:
                    pipe.memory_usage(key, samples=0)
                return pipe.execute()

            total += sum(n or 0 for n in self._call("MEMORY USAGE", usage))
        return total

    def _flush(self) -> None:
        settings = self._server_settings()
        if settings["appendonly"] == "yes" and settings["appendfsync"] == "always":
            return
        if tuple(int(p) for p in settings["version"].split(".")[:2]) >= (7, 2) \
                and settings["appendonly"] == "yes":
            self._call("WAITAOF", lambda: self._client.execute_command(
                "WAITAOF", 1, 0, int(self.config["timeout"] * 1000)))
            return
        if settings["appendonly"] == "yes" and settings["appendfsync"] == "everysec":
            self._wait_everysec_fsync()
            return
        self._rewrite_aof()

    #: Redis' bound for ``everysec``: a write is fsynced within 2 s (it delays writes otherwise)
    _EVERYSEC_BOUND = 2.0

    def _wait_everysec_fsync(self) -> None:
        """Wait until the background fsync has covered this client's last write."""
        last = self._last_write
        if last is not None:
            wait = last + self._EVERYSEC_BOUND - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        deadline = time.monotonic() + max(10.0, self.config["timeout"])
        while self._call("INFO", lambda: self._client.info("persistence")).get("aof_pending_bio_fsync"):
            if time.monotonic() > deadline:
                raise BackendUnavailableError(
                    f"redis at {self.address}: the AOF fsync is still pending after the wait; "
                    f"the server's disk is too slow — see the server log")
            time.sleep(0.02)

    def _rewrite_aof(self) -> None:
        """BGREWRITEAOF and wait until a rewrite that began after this call has finished."""
        def persistence() -> dict:
            return self._call("INFO", lambda: self._client.info("persistence"))

        deadline = time.monotonic() + max(60.0, self.config["timeout"])
        before = persistence().get("aof_rewrites", 0)
        while True:
            try:
                self._call("BGREWRITEAOF", self._client.bgrewriteaof)
                break
            except BackendUnavailableError as exc:
                if "already in progress" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        while time.monotonic() < deadline:
            info = persistence()
            if (not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled")
                    and info.get("aof_rewrites", 0) > before):
                if info.get("aof_last_bgrewrite_status") != "ok":
                    raise BackendUnavailableError(
                        f"redis at {self.address}: AOF rewrite failed; see the server log"
                    )
                return
            time.sleep(0.02)
        raise BackendUnavailableError(
            f"redis at {self.address}: AOF rewrite did not finish in time; see the server log")

    def _close(self) -> None:
        with self._conns_lock:
            for wire in self._wires:
                wire.close()
            self._wires.clear()
        self._client.close()

    def _stats(self) -> dict[str, Any]:
        if not self.closed:
            try:
                self._server = self._server_settings()
            except BackendUnavailableError:
                pass  # a dead server: report what open() saw
        return {
            "address": self.address,
            "prefix": self.config["prefix"],
            "server_version": self._server.get("version"),
            "server_appendonly": self._server.get("appendonly"),
            "server_appendfsync": self._server.get("appendfsync"),
        }
