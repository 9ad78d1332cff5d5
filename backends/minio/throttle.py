"""S3's request-rate throttling in front of an S3 server that has none: a small HTTP relay that
answers ``503 SlowDown`` once a prefix exceeds its request rate.

S3 serves "at least 3,500 PUT/COPY/POST/DELETE or 5,500 GET/HEAD requests per second per
partitioned prefix" and answers the requests above that with HTTP 503 and the XML error
``<Code>SlowDown</Code>`` (no ``Retry-After`` header: the client's backoff decides).  MinIO has
no per-prefix rate limit: its ``api.requests_max`` caps the requests in flight on the whole
server and answers ``429 TooManyRequests``, which is neither S3's status nor its code (and
needs the shared server reconfigured), so the throttling is done here.

The model:

* **A prefix** is what S3 partitions a bucket's key space by.  S3 splits partitions itself, on
  any character of the key, after minutes of sustained load; a benchmark run is shorter than
  that, so the relay holds the partitions fixed: a request's prefix is its bucket and the object
  name up to and including its ``depth``-th ``/`` (the whole name if it has fewer).  A request
  that names no object (``ListObjectsV2``) is charged to its ``prefix`` parameter's prefix, one
  that names neither (``HeadBucket``, ``DeleteObjects``) to the bucket's.  The ``minio``
  backend sets ``depth`` to its store's prefix (plus the entropy segment with
  ``prefix_entropy``), so a store is one partition and ``prefix_entropy=N`` makes it N.
* **The rate**: one token bucket per prefix, ``rate`` requests a second for every request type
  (S3's two classes, writes and reads, are one here), holding at most ``burst`` tokens (a tenth
  of a second of the rate unless told, at least one request).  A request that finds a token is
  forwarded; one that finds none is answered ``503 SlowDown`` and never reaches the server, so
  throttling costs no stored state.  ``rate=inf`` forwards everything: the relay's own cost
  without its limit.

Safety of the relay: it forwards every request's bytes as the client sent them (request line,
headers with ``Host`` as signed, body), so S3 signature v4 verifies at the server as if the
client had talked to it directly; responses come back byte for byte.  It parses only what HTTP/1.1
framing needs (``Content-Length``, ``Transfer-Encoding: chunked``, ``Expect: 100-continue``).
Each client connection gets its own server connection and thread.  :meth:`ThrottleProxy.close`
stops accepting, shuts every socket and joins every thread it started, so a closed relay leaves
no thread, socket or port behind.
"""

from __future__ import annotations

import email.utils
import math
import socket
import threading
import time
import uuid
from typing import BinaryIO
from urllib.parse import parse_qs, unquote, urlsplit

HOST = "127.0.0.1"
#: S3's own words for the answer (its documented error code and message)
SLOWDOWN_CODE = "SlowDown"
SLOWDOWN_MESSAGE = "Please reduce your request rate."
#: seconds of the rate a prefix's bucket holds when no ``burst`` is given
BURST_SECONDS = 0.1
_ACCEPT_POLL_S = 0.1  # how often the accept loop looks whether it should stop
_JOIN_S = 5.0
_MAX_LINE = 65536


class TokenBuckets:
    """One token bucket per prefix: ``rate`` tokens a second, at most ``burst`` held.

    Buckets start full.  :meth:`take` is atomic (one lock), so concurrent requests of one
    prefix never share a token."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.burst = max(1.0, rate * BURST_SECONDS) if burst is None else burst
        self._held: dict[str, tuple[float, float]] = {}  # prefix -> (tokens, when)
        self._lock = threading.Lock()

    @property
    def prefixes(self) -> int:
        """Prefixes that have asked for a token."""
        with self._lock:
            return len(self._held)

    def take(self, prefix: str, now: float | None = None) -> bool:
        """Whether a request of ``prefix`` may go now (and if so, its token is spent)."""
        if math.isinf(self.rate):
            return True
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, then = self._held.get(prefix, (self.burst, now))
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            if tokens >= 1.0:
                self._held[prefix] = (tokens - 1.0, now)
                return True
            self._held[prefix] = (tokens, now)
            return False


def prefix_of(target: str, depth: int) -> str:
    """The prefix (module doc) a request for ``target`` (a path-style request target,
    ``/bucket/name?query``) is charged to: ``bucket/`` and the name up to its ``depth``-th
    ``/``."""
    parts = urlsplit(target)
    bucket, _, name = unquote(parts.path).lstrip("/").partition("/")
    if not name:  # a bucket request: a listing is charged to the prefix it lists
        name = parse_qs(parts.query).get("prefix", [""])[0]
    cut = -1
    for _ in range(depth):
        cut = name.find("/", cut + 1)
        if cut < 0:
            return f"{bucket}/{name}"
    return f"{bucket}/{name[:cut + 1]}"


def slowdown_response(resource: str, head_only: bool, close: bool) -> bytes:
    """S3's ``503 SlowDown`` answer, XML body and all (none to a ``HEAD``, as S3 answers)."""
    request_id = uuid.uuid4().hex[:16].upper()
    body = b"" if head_only else (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{SLOWDOWN_CODE}</Code><Message>{SLOWDOWN_MESSAGE}</Message>"
        f"<Resource>{_xml(resource)}</Resource><RequestId>{request_id}</RequestId>"
        "<HostId>ckptbench-throttle</HostId></Error>").encode()
    head = ["HTTP/1.1 503 Slow Down", "Content-Type: application/xml",
            f"Content-Length: {len(body)}", f"x-amz-request-id: {request_id}",
            f"Date: {email.utils.formatdate(usegmt=True)}", "Server: ckptbench-throttle"]
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Head:
    """One HTTP message's start line and headers, as received (``raw``) and parsed."""

    __slots__ = ("raw", "start", "headers")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        lines = raw.decode("latin-1").split("\r\n")
        self.start = lines[0].split(" ", 2)
        self.headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                self.headers[name.strip().lower()] = value.strip()

    def wants_close(self) -> bool:
        return self.headers.get("connection", "").lower() == "close"

    def has_body(self) -> bool:
        return ("chunked" in self.headers.get("transfer-encoding", "").lower()
                or self.headers.get("content-length", "0") not in ("", "0"))


def _read_head(src: BinaryIO) -> _Head | None:
    """The next message head from ``src``; ``None`` at a clean end of the connection."""
    lines: list[bytes] = []
    while True:
        line = src.readline(_MAX_LINE)
        if not line:
            if lines:
                raise ConnectionError("connection closed inside a message head")
            return None
        if line in (b"\r\n", b"\n"):
            if not lines:
                continue  # a stray CRLF between messages (RFC 9112 allows it)
            lines.append(line)
            return _Head(b"".join(lines))
        lines.append(line)


def _copy(src: BinaryIO, dst: socket.socket | None, n: int) -> None:
    """``n`` bytes from ``src`` to ``dst`` (dropped when ``dst`` is ``None``)."""
    while n > 0:
        chunk = src.read(min(n, 1 << 16))
        if not chunk:
            raise ConnectionError("connection closed inside a message body")
        if dst is not None:
            dst.sendall(chunk)
        n -= len(chunk)


def _relay_body(src: BinaryIO, dst: socket.socket | None, head: _Head, *,
                until_close: bool = False) -> None:
    """The body that follows ``head``, from ``src`` to ``dst``, framed as the head says."""
    headers = head.headers
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = src.readline(_MAX_LINE)
            if not line:
                raise ConnectionError("connection closed inside a chunked body")
            if dst is not None:
                dst.sendall(line)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (trailer := src.readline(_MAX_LINE)) not in (b"\r\n", b"\n", b""):
                    if dst is not None:
                        dst.sendall(trailer)
                if dst is not None:
                    dst.sendall(b"\r\n")
                return
            _copy(src, dst, size + 2)  # the chunk and its CRLF
    elif "content-length" in headers:
        _copy(src, dst, int(headers["content-length"]))
    elif until_close:  # a response framed by the end of its connection
        while chunk := src.read1(1 << 16):
            if dst is not None:
                dst.sendall(chunk)


class ThrottleProxy:
    """The relay (module doc) on a free port of 127.0.0.1, forwarding to ``upstream``
    (``host:port`` of an ``http`` S3 server).  ``url`` is what a client uses as its endpoint;
    :meth:`close` (or the ``with`` block's end) stops it and everything it started."""

    def __init__(self, upstream: tuple[str, int], rate: float, depth: int,
                 burst: float | None = None) -> None:
        self.upstream = upstream
        self.depth = depth
        self.buckets = TokenBuckets(rate, burst)
        self.forwarded = 0
        self.slowdowns = 0
        self._count_lock = threading.Lock()
        self._stop = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(_ACCEPT_POLL_S)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}"
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True,
                                          name=f"s3-throttle-{self.port}")
        self._acceptor.start()

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> "ThrottleProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, shut every connection, join every thread; idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._acceptor.join(_JOIN_S)
        self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its thread
        for thread in threads:
            thread.join(_JOIN_S)

    def stats(self) -> dict:
        """The relay's settings and what it did: requests forwarded and answered SlowDown."""
        return {"rate_per_prefix": self.buckets.rate, "burst": self.buckets.burst,
                "prefix_depth": self.depth, "prefixes": self.buckets.prefixes,
                "forwarded": self.forwarded, "slowdowns": self.slowdowns}

    # -- connections ------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True,
                                      name=f"s3-throttle-{self.port}-conn")
            with self._lock:
                if self._stop.is_set():
                    client.close()
                    return
                self._sockets.add(client)
                self._threads.add(thread)
            thread.start()

    def _track(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.add(sock)
        if self._stop.is_set():  # close() may already have shut the others
            sock.shutdown(socket.SHUT_RDWR)
        return sock

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        owned = [client]
        try:
            src = client.makefile("rb")
            up_src: BinaryIO | None = None
            while not self._stop.is_set():
                request = _read_head(src)
                if request is None:
                    return
                if upstream is None:
                    upstream = self._track(socket.create_connection(self.upstream))
                    owned.append(upstream)
                    up_src = upstream.makefile("rb")
                assert up_src is not None
                if not self._relay(request, src, client, upstream, up_src):
                    return
        except (OSError, ValueError, ConnectionError):
            return  # a connection ended or broke: the client sees it and botocore retries
        finally:
            with self._lock:
                for sock in owned:
                    self._sockets.discard(sock)
                self._threads.discard(threading.current_thread())
            for sock in owned:
                sock.close()

    def _relay(self, request: _Head, src: BinaryIO, client: socket.socket,
               upstream: socket.socket, up_src: BinaryIO) -> bool:
        """Forward one request and its response, or answer it SlowDown; whether the
        connection stays open for the next request."""
        method, target = request.start[0], request.start[1] if len(request.start) > 1 else "/"
        expects = request.headers.get("expect", "").lower() == "100-continue"
        if not self.buckets.take(prefix_of(target, self.depth)):
            with self._count_lock:
                self.slowdowns += 1
            # the body is read and dropped, unless the client waits for a 100 it never gets:
            # then the connection closes after the answer, as a server does
            close = expects and request.has_body()
            if request.has_body() and not expects:
                _relay_body(src, None, request)
            client.sendall(slowdown_response(urlsplit(target).path, method == "HEAD",
                                             close or request.wants_close()))
            return not (close or request.wants_close())
        with self._count_lock:
            self.forwarded += 1
        upstream.sendall(request.raw)
        response = None
        if expects and request.has_body():
            response = _read_head(up_src)
            if response is None:
                return False
            if response.start[1:2] == ["100"]:
                client.sendall(response.raw)
                response = None
        if response is None:
            _relay_body(src, upstream, request)
            response = _read_head(up_src)
            while response is not None and response.start[1:2] in (["100"], ["102"], ["103"]):
                client.sendall(response.raw)  # an interim answer: the final one follows
                response = _read_head(up_src)
            if response is None:
                return False
        else:  # a final answer before the body: the body is never sent, the connection ends
            client.sendall(response.raw)
            _relay_body(up_src, client, response, until_close=True)
            return False
        client.sendall(response.raw)
        status = response.start[1] if len(response.start) > 1 else ""
        if method != "HEAD" and status not in ("204", "304"):
            framed = "content-length" in response.headers or "chunked" in \
                response.headers.get("transfer-encoding", "").lower()
            _relay_body(up_src, client, response, until_close=not framed)
            if not framed:
                return False
        return not (response.wants_close() or request.wants_close())
