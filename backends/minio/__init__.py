"""``minio``: one S3 object per checkpoint, for MinIO or any S3-compatible endpoint.

Talks plain S3 through boto3 (path-style addressing, signature v4), so the same backend works
against AWS S3: leave ``endpoint`` empty (boto3 then uses AWS's regional endpoint), set ``region``,
``bucket`` and credentials (``access_key``/``secret_key``, or empty to use boto3's usual chain:
environment, ``~/.aws``, instance role).  The bucket is created if it is missing.

Object names: ``<prefix><hex of the key's UTF-8>``, with a ``/`` every 200 hex digits (MinIO
keeps each name segment under 255 bytes).  Keys are arbitrary ``str`` (``/``, ``..``, control
characters, lone surrogates) and S3 forbids or rewrites some of those, so each key is
hex-encoded.  Hex keeps byte order and prefixes, so ``ListObjectsV2`` (which lists in UTF-8 byte
order) returns keys already in ``scan`` order and ``scan(prefix)`` is a server-side prefix list.
The price: a key may have at most about (1024 - len(prefix)) / 2 bytes.

Durability modes:

* ``sync`` (default): nothing acknowledged is lost in a power cut, given a MinIO started with
  ``MINIO_FS_OSYNC=on`` (``bench services up minio`` does).  MinIO writes an object's data and
  ``xl.meta`` with ``O_DSYNC``/``fdatasync``, renames them into place and, with that setting,
  calls ``sync(2)`` before it answers, so the rename is durable too.  A DELETE is a rename into
  MinIO's trash that MinIO never syncs, so in this mode every delete is followed by a PUT of a
  small barrier object (``<prefix>sync-barrier``, never a key: keys are hex, and removed again at
  ``close``), whose ``sync(2)`` makes the delete durable before ``delete`` returns.  ``bench audit power-loss --backend minio``
  checks this.
* ``server``: what the server does, no barrier.  For MinIO without ``MINIO_FS_OSYNC`` the data is
  synced but the renames are not, so a power cut can undo the latest PUTs and DELETEs
  (docs/audit.md); AWS S3 acknowledges after storing an object redundantly.

Every request is bounded: connect/read timeouts and botocore's own bounded retries
(``retry_mode``, "standard" by default: exponential backoff with jitter, at most ``retries``
attempts); the final failure is a :class:`BackendUnavailableError` naming the endpoint and the
fix.  ``put_many``/``get_many`` run on a bounded thread pool (boto3 clients are thread-safe).

Throttling (``throttle_rps``): S3 answers ``503 SlowDown`` above a request rate per prefix; MinIO
has no such limit, so with ``throttle_rps=N`` the store starts a relay on a free local port
(:mod:`.throttle`) that forwards to ``endpoint`` and answers ``SlowDown`` once a prefix goes
over N requests a second, and the client talks to the relay.  The store's prefix is one S3
prefix, an entropy segment (below) one more level.  botocore retries the refused requests with
its own backoff; every refusal is counted in the ledger (``throttled``), every resend as a
retry, and a request still refused when the retries run out fails as a
:class:`ThrottledError` (nothing acknowledged).  The relay stops with the store; each store
object has its own, so several processes opening one store are each limited by themselves.

Key layout (``prefix_entropy=N``, Flink's entropy injection): with N > 1 a key's object name
gets a segment ``x<h>/`` after the store's prefix, ``h`` a hash of the key modulo N in
fixed-width hex (``x`` is no hex digit, so the segment is never mistaken for a key), spreading
the keys over N S3 prefixes so that a per-prefix limit allows N times the rate.  The hash makes
every key's place computable, so a ``get``/``put``/``delete`` is still one request;
``scan``/``keys``/``footprint`` list all N prefixes and merge them in key order (N listings at
least).  N is part of the layout: the store records it in an object ``<prefix>prefix-entropy``
on first open and refuses to open with another N (a store written with N > 1 and opened with
N = 1 does not see its keys).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import heapq
import threading
import time
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import urlsplit

import boto3
import botocore.exceptions as bex
from botocore.config import Config
from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url

from ..base import (LONGEST_WAIT_S, Backend, BackendUnavailableError, BadOptionError, Claim,
                    Option, StorageFullError, ThrottledError)
from ..ledger import current_taps, tapped
from .throttle import SLOWDOWN_CODE, ThrottleProxy

T = TypeVar("T")

MAX_OBJECT_NAME = 1024
#: what a power-loss audit's cuts measure: MinIO's sync(2) calls (see :class:`Claim`)
_SYNC_GATE_NOTE = ("MinIO's sync(2) calls reached the lossy file system through the sync gate: "
                   "{global_syncs} while the writers ran ({acknowledged} writes acknowledged)")
_CHUNK = 200  # hex characters per object name segment (MinIO: at most 255 bytes each)
#: the object a ``sync``-mode delete is followed by (not hex, so never a key's object name)
BARRIER = "sync-barrier"
#: the object recording a store's ``prefix_entropy`` (not hex either)
ENTROPY_MARKER = "prefix-entropy"
#: the most keys one ``DeleteObjects`` request may name (S3's limit)
DELETE_BATCH = 1000
#: keys a ``scan`` lists before it fetches their values on the pool
SCAN_BATCH = 1000
_FULL_CODES = {"XMinioStorageFull", "StorageFull", "EntityTooLarge"}
# "403": a HEAD reply has no body, so no error code either
_AUTH_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"}
_NETWORK_ERRORS = (bex.EndpointConnectionError, bex.ConnectTimeoutError, bex.ReadTimeoutError,
                   bex.ConnectionClosedError, bex.ConnectionError, ConnectionError, TimeoutError)


def encode_key(key: str) -> str:
    """Order- and prefix-preserving object name for an arbitrary ``str`` key.

    Hex of the UTF-8 bytes, cut into ``/``-separated chunks of ``_CHUNK`` characters because
    MinIO stores an object as a directory path and a path segment may not exceed 255 bytes.
    The cuts sit at fixed offsets and ``/`` sorts before every hex digit, so order and prefixes
    survive the cutting.
    """
    text = key.encode("utf-8", "surrogatepass").hex()
    return "/".join(text[i:i + _CHUNK] for i in range(0, len(text), _CHUNK))


def _text(header: str | bytes | None) -> str:
    """A header's value as text (botocore holds some as ``bytes``), ``""`` when absent."""
    return header.decode("latin-1") if isinstance(header, bytes) else (header or "")


def decode_key(name: str) -> str:
    return bytes.fromhex(name.replace("/", "")).decode("utf-8", "surrogatepass")


class EndpointOption(Option):
    """The S3 endpoint: an ``http``/``https`` URL with a host botocore accepts, or empty for AWS
    S3 — checked when options are parsed, so a typo is one line naming the expected form rather
    than botocore's error when the client is built."""

    def allows(self, value: Any) -> bool:
        if not super().allows(value):
            return False
        if value == "":
            return True
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and bool(
            is_valid_endpoint_url(value) or is_valid_ipv6_endpoint_url(value))

    def allowed(self) -> str:
        return "an http:// or https:// URL with a host and optional port, or empty for AWS S3"


class MinioBackend(Backend):
    name = "minio"
    kind = "server"
    durability_modes = ("sync", "server")
    claims = {
        "sync": Claim("sync", "sync: MINIO_FS_OSYNC=on, a PUT is answered after its data and "
                      "xl.meta are fdatasync'ed, renamed into place and sync(2) is called; each "
                      "delete is followed by a barrier PUT; no acknowledged write may be lost",
                      crash_safe=True, power_safe=True, note=_SYNC_GATE_NOTE),
        "server": Claim("server", "a PUT is answered once its data and xl.meta are fdatasync'ed "
                        "and renamed into place; MinIO fsyncs no directory, so a rename is "
                        "durable only with the file system's next journal commit (ext4, XFS)", crash_safe=False, power_safe=False, note=_SYNC_GATE_NOTE),
    }
    audit_mode = "sync"
    audit_run_seconds = 3.0
    #: one value is one object written by a single PUT: 5 GiB at most in S3's API (larger
    #: objects, up to 5 TiB, need a multipart upload, which this backend does not use)
    max_value_bytes = 5 * 1024 ** 3
    options = {
        "endpoint": EndpointOption(str, "http://127.0.0.1:9000", "S3 endpoint URL (empty: AWS S3)"),
        "bucket": Option(str, "ckptbench", "bucket holding the checkpoints (created if missing)"),
        "prefix": Option(str, "ckpt/", "object name prefix of this store",
                         max_bytes=MAX_OBJECT_NAME - 1),
        "access_key": Option(str, "ckptbench", "S3 access key (empty: boto3's credential chain)"),
        "secret_key": Option(str, "ckptbench-secret", "S3 secret key"),
        "region": Option(str, "us-east-1", "S3 region"),
        "timeout": Option(float, 5.0, "connect and read timeout per request, seconds",
                          min=0, min_exclusive=True, max=LONGEST_WAIT_S),
        "retries": Option(int, 3, "total attempts per request (botocore standard retry mode)",
                          min=1),
        "retry_mode": Option(str, "standard", "botocore's retry mode: standard (exponential "
                             "backoff with jitter) or adaptive (standard, plus a client-side rate "
                             "limit that slows down after throttled answers)",
                             choices=("standard", "adaptive")),
        "max_workers": Option(int, 8, "threads for put_many/get_many/scan", min=1),
        "throttle_rps": Option(float, 0.0, "S3-like throttling: requests a second allowed per "
                               "prefix, answered 503 SlowDown above it by a local relay in front "
                               "of endpoint (0: no relay; inf: the relay without a limit)",
                               min=0, finite=False),
        "prefix_entropy": Option(int, 1, "spread the keys over this many S3 prefixes by a hash "
                                 "of the key (Flink's entropy injection; 1: none)",
                                 min=1, max=4096),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        cfg = self.config
        self.bucket = cfg["bucket"]
        self.where = f"{cfg['endpoint'] or 'AWS S3'} bucket {self.bucket}"
        entropy = cfg["prefix_entropy"]
        width = len(f"{entropy - 1:x}")
        #: the entropy segments (``x<h>/``), one per S3 prefix; ``[""]`` without entropy
        self._segments = [f"x{h:0{width}x}/" for h in range(entropy)] if entropy > 1 else [""]
        self._proxy = self._throttle() if cfg["throttle_rps"] > 0 else None
        endpoint = self._proxy.url if self._proxy else cfg["endpoint"]
        self._client = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint or None,
            region_name=cfg["region"],
            aws_access_key_id=cfg["access_key"] or None,
            aws_secret_access_key=cfg["secret_key"] or None,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                connect_timeout=cfg["timeout"], read_timeout=cfg["timeout"],
                retries={"total_max_attempts": cfg["retries"], "mode": cfg["retry_mode"]},
                max_pool_connections=max(10, cfg["max_workers"]),
            ),
        )
        self._count_requests()
        self._pool = cf.ThreadPoolExecutor(cfg["max_workers"], thread_name_prefix="minio")
        self._server: str | None = None
        self._barrier_written = False
        try:
            self._ensure_bucket()
            if entropy > 1:
                self._check_entropy(entropy)
        except BaseException:
            self._pool.shutdown()
            self._client.close()
            if self._proxy is not None:
                self._proxy.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------
    def _throttle(self) -> ThrottleProxy:
        """The throttling relay (module doc) in front of ``endpoint``, which must be plain
        ``http``; its prefixes are the store's prefix and, with entropy, one level more."""
        cfg = self.config
        parts = urlsplit(cfg["endpoint"])
        if parts.scheme != "http" or not parts.hostname:
            raise BadOptionError(
                f"minio: throttle_rps needs an http:// endpoint (the relay speaks plain HTTP), "
                f"not {cfg['endpoint'] or 'AWS S3'!r}; give --opt endpoint=http://HOST:PORT or "
                f"leave throttle_rps at 0")
        depth = cfg["prefix"].count("/") + (1 if cfg["prefix_entropy"] > 1 else 0)
        return ThrottleProxy((parts.hostname, parts.port or 80), cfg["throttle_rps"], depth)

    def _check_entropy(self, entropy: int) -> None:
        """Record ``prefix_entropy`` in the store, or refuse another than the one recorded: a
        key's object name depends on it."""
        marker = self.config["prefix"] + ENTROPY_MARKER
        recorded = self._get_name(marker)
        if recorded is None:
            self._call("PutObject", lambda: self._client.put_object(
                Bucket=self.bucket, Key=marker, Body=str(entropy).encode()))
        elif recorded.strip() != str(entropy).encode():
            shown = recorded.decode("ascii", "replace")[:20]
            raise BadOptionError(
                f"minio: the store at {self.where} prefix {self.config['prefix']!r} was written "
                f"with prefix_entropy={shown}; open it with --opt prefix_entropy={shown}")

    def _count_requests(self) -> None:
        """Count every HTTP request botocore sends in :attr:`ledger`, at botocore's own event
        hooks: ``before-send`` once per attempt (so a retry is a request too), by S3 operation,
        with the body's bytes (its ``Content-Length``), and as a retry where botocore's ``amz-sdk-request`` header says
        it is a second or later attempt, with the time since the failed attempt was answered
        (botocore's backoff sleep); ``needs-retry`` after each attempt, with the response's
        ``Content-Length`` (a GET's object, counted when the server answers), and as
        throttled where the answer is S3's ``503 SlowDown`` (a ``HEAD``'s has no body: its
        status alone says it)."""
        ledger, events, state = self.ledger, self._client.meta.events, threading.local()

        def before_send(request: Any, event_name: str, **_: Any) -> None:
            headers = request.headers
            length = _text(headers.get("Content-Length"))  # the body, however it is held
            sent = int(length) if length.isdigit() else 0
            attempt = _text(headers.get("amz-sdk-request"))  # "attempt=N; max=M"
            if attempt and not attempt.startswith("attempt=1;"):  # a retry: since the failure
                ledger.retried(time.monotonic() - getattr(state, "answered", time.monotonic()))
            ledger.record_shared(event_name.rsplit(".", 1)[-1], sent)

        def after_attempt(response: Any, attempts: int, **_: Any) -> None:
            if response is not None:
                length = _text(response[0].headers.get("content-length"))
                if length.isdigit():
                    ledger.received_more(int(length))
                if response[0].status_code == 503 and response[1].get("Error", {}).get(
                        "Code") in (SLOWDOWN_CODE, "503"):
                    ledger.refused()
            state.answered = time.monotonic()  # a retry, if any, waits from here

        events.register("before-send.s3", before_send)
        events.register_first("needs-retry.s3", after_attempt)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one S3 request; turn every failure into a typed error that names the fix."""
        try:
            return fn()
        except _NETWORK_ERRORS as exc:
            raise BackendUnavailableError(
                f"minio {what} at {self.where} failed after {self.config['retries']} attempts: "
                f"{exc}; is the server running? start it with `bench services up minio`"
            ) from exc
        except bex.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == SLOWDOWN_CODE or (code == "503" and status == 503):
                raise self._throttled(what, exc) from exc
            if code in _FULL_CODES:
                raise StorageFullError(f"minio {what} at {self.where}: {exc}") from exc
            if code in _AUTH_CODES:
                raise BackendUnavailableError(
                    f"minio {what} at {self.where} was refused ({code}); check access_key/"
                    f"secret_key (CKPTBENCH_MINIO_USER/PASSWORD for `bench services`)"
                ) from exc
            raise BackendUnavailableError(f"minio {what} at {self.where}: {exc}") from exc
        except bex.BotoCoreError as exc:
            raise BackendUnavailableError(f"minio {what} at {self.where}: {exc}") from exc

    def _throttled(self, what: str, exc: bex.ClientError) -> ThrottledError:
        """The one line for a request refused ``SlowDown`` on every attempt it was given."""
        cfg = self.config
        attempts = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) + 1
        quota = "" if attempts >= cfg["retries"] else " (botocore's retry quota ran out first)"
        return ThrottledError(
            f"minio {what} at {self.where}: 503 SlowDown on all {attempts} attempts of "
            f"botocore's {cfg['retry_mode']} retry mode{quota}; nothing was stored by it.  Lower "
            f"the request rate, allow more attempts (--opt retries=N) or spread the keys over "
            f"more prefixes (--opt prefix_entropy=N)")

    def _ensure_bucket(self) -> None:
        def head() -> dict | None:
            try:
                return self._client.head_bucket(Bucket=self.bucket)
            except bex.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket"):
                    return None
                raise

        reply = self._call("HeadBucket", head)
        if reply is None:
            def create() -> None:
                try:
                    self._client.create_bucket(Bucket=self.bucket)
                except bex.ClientError as exc:  # a concurrent opener won the race
                    if exc.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
                        raise

            self._call("CreateBucket", create)
            reply = self._call("HeadBucket", head) or {}
        headers = reply.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        self._server = headers.get("server")

    def _segment(self, key: str) -> str:
        """The key's entropy segment (module doc): ``""`` without entropy."""
        segments = self._segments
        if len(segments) == 1:
            return segments[0]
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        return segments[int.from_bytes(digest, "big") % len(segments)]

    def _name(self, key: str) -> str:
        name = self.config["prefix"] + self._segment(key) + encode_key(key)
        if len(name.encode()) > MAX_OBJECT_NAME:
            raise ValueError(
                f"key too long for S3: {len(key.encode('utf-8', 'surrogatepass'))} bytes; the "
                f"limit with prefix {self.config['prefix']!r} is about "
                f"{(MAX_OBJECT_NAME - len(self.config['prefix'].encode()) - len(self._segments[0])) * 100 // 201} bytes"
            )
        return name

    def _parallel(self, fn: Callable[[Any], T], args: list) -> list[T]:
        """``fn`` of each arg on the pool; the caller's ledger taps see the pool's requests."""
        if len(args) <= 1:
            return [fn(a) for a in args]
        taps = current_taps()

        def counted(arg: Any) -> T:
            with tapped(taps):
                return fn(arg)

        return list(self._pool.map(counted if taps else fn, args))  # re-raises the first failure

    # -- primitives -------------------------------------------------------------------------
    def _put(self, key: str, value: bytes) -> None:
        name = self._name(key)
        self._call("PutObject", lambda: self._client.put_object(
            Bucket=self.bucket, Key=name, Body=value))

    def _get_name(self, name: str) -> bytes | None:
        def fetch() -> bytes | None:
            try:
                return self._client.get_object(Bucket=self.bucket, Key=name)["Body"].read()
            except bex.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None
                raise

        return self._call("GetObject", fetch)

    def _get(self, key: str) -> bytes | None:
        return self._get_name(self._name(key))

    def _delete(self, key: str) -> None:
        name = self._name(key)
        self._call("DeleteObject", lambda: self._client.delete_object(
            Bucket=self.bucket, Key=name))
        self._after_delete()

    def _after_delete(self) -> None:
        """With ``sync``: the barrier PUT (module doc) that makes the deletes before it durable."""
        if self.durability == "sync":  # MinIO syncs after a PUT's rename, never after a delete's
            barrier = self.config["prefix"] + BARRIER
            self._call("PutObject", lambda: self._client.put_object(
                Bucket=self.bucket, Key=barrier, Body=b""))
            self._barrier_written = True

    def _delete_many(self, keys: list[str]) -> None:
        """``DeleteObjects`` of up to :data:`DELETE_BATCH` keys a request (S3's limit), then one
        barrier as :meth:`_delete` makes; an error reported for any key fails the batch."""
        names = [self._name(key) for key in dict.fromkeys(keys)]
        for start in range(0, len(names), DELETE_BATCH):
            objects = [{"Key": name} for name in names[start:start + DELETE_BATCH]]
            reply = self._call("DeleteObjects", lambda o=objects: self._client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": o, "Quiet": True}))
            errors = reply.get("Errors") or []
            if errors:
                first = errors[0]
                raise BackendUnavailableError(
                    f"minio bucket {self.bucket!r}: DeleteObjects failed for {len(errors)} of "
                    f"{len(objects)} objects (first: {first.get('Key')!r}: {first.get('Code')} "
                    f"{first.get('Message')})")
        if names:
            self._after_delete()

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        latest = dict(items)  # a repeated key: its last value wins, as with sequential puts
        self._parallel(lambda kv: self._put(*kv), list(latest.items()))

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        unique = list(dict.fromkeys(keys))
        values = self._parallel(self._get, unique)
        return {k: v for k, v in zip(unique, values) if v is not None}

    def _listing(self, root: str) -> Iterator[list[dict[str, Any]]]:
        """The bucket's objects whose names start with ``root``, a ``ListObjectsV2`` page at a
        time (each page one retried call)."""
        paginator = self._client.get_paginator("list_objects_v2")
        pages = iter(paginator.paginate(Bucket=self.bucket, Prefix=root))
        while (page := self._call("ListObjectsV2", lambda: next(pages, None))) is not None:
            yield page.get("Contents", [])

    def _roots(self, prefix: str) -> list[str]:
        """The object name prefixes holding the keys that start with ``prefix``: one per
        entropy segment."""
        return [self.config["prefix"] + segment + encode_key(prefix) for segment in self._segments]

    def _named(self, segment: str, prefix: str) -> Iterator[tuple[str, str]]:
        """(key, object name) of the objects this backend wrote for keys starting with
        ``prefix`` in one entropy segment, in key order (others are skipped)."""
        base = self.config["prefix"] + segment
        for objects in self._listing(base + encode_key(prefix)):
            for obj in objects:
                try:
                    yield decode_key(obj["Key"][len(base):]), obj["Key"]
                except ValueError:
                    continue  # not written by this backend

    def _listed(self, prefix: str) -> Iterator[tuple[str, str]]:
        """(key, object name) of every key starting with ``prefix``, in key order: each
        segment's listing is in key order already (hex keeps it), so they merge lazily."""
        streams = [self._named(segment, prefix) for segment in self._segments]
        return streams[0] if len(streams) == 1 else heapq.merge(*streams)

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        listed = self._listed(prefix)
        while found := [item for _, item in zip(range(SCAN_BATCH), listed)]:
            values = self._parallel(self._get_name, [name for _, name in found])
            for (key, _), value in zip(found, values):
                if value is not None:  # deleted since the listing
                    yield key, value

    def _keys(self, prefix: str) -> list[str]:
        return [key for key, _ in self._listed(prefix)]

    def _footprint(self, prefix: str) -> int:
        """The sizes of this store's objects, as the bucket lists them (S3 bills by these)."""
        return sum(obj["Size"] for root in self._roots(prefix)
                   for objects in self._listing(root) for obj in objects)

    def _close(self) -> None:
        if self._barrier_written:  # the barrier means nothing once every delete has returned
            try:
                self._client.delete_object(Bucket=self.bucket, Key=self.config["prefix"] + BARRIER)
            except (bex.BotoCoreError, bex.ClientError):
                pass  # left behind it costs a few bytes; scan never lists it as a key
        self._pool.shutdown()
        self._client.close()
        if self._proxy is not None:
            self._proxy.close()

    def _stats(self) -> dict[str, Any]:
        cfg = self.config
        out = {"endpoint": cfg["endpoint"] or "AWS S3", "bucket": self.bucket,
               "prefix": cfg["prefix"], "server": self._server,
               "retry": {"mode": cfg["retry_mode"], "max_attempts": cfg["retries"]},
               "prefix_entropy": cfg["prefix_entropy"]}
        if self._proxy is not None:
            out["throttle"] = self._proxy.stats()
        return out
