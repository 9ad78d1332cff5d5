"""Side-by-side runs of a backend and the server's own load tool, in one invocation.

A backend is only as honest as its overhead is small: ``redis-benchmark -t set`` is the floor for
the Redis backend (same server, same value size, same number of connections and pipeline depth).
The peer runs before *and* after each round of our clients and each round's ratio uses the mean
of the two peer runs around it, so drift on a shared machine hits both sides; the result is the
median round's ratio, so one disturbed round does not decide.

CPU placement is part of the setting too.  On a small VM a round trip between a client and a
server on the *same* CPU is much cheaper than one across two CPUs (no wake-up interrupt), and left
to the scheduler each run lands on either by chance, so identical runs can differ widely.  Both
clients therefore run under one placement (:func:`placement`): ``cross`` (default; the server's
event loop on one CPU, every client on the others — what a client on another machine sees),
``same`` (all on one CPU) or ``any`` (the scheduler's choice).
"""

from __future__ import annotations

import contextlib
import csv
import io
import multiprocessing as mp
import os
import shutil
import signal
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from backends import BackendUnavailableError, open_backend

from experiments.core.document import Document, Environment

PLACEMENTS = ("cross", "same", "any")


def placement(kind: str, server_pid: int | None) -> tuple[set[int] | None, set[int] | None, str]:
    """``(server CPUs, client CPUs, description)`` for a placement; ``None`` = leave as is.  Only a
    server process on this machine can be pinned; with one CPU every placement is ``any``."""
    cpus = sorted(os.sched_getaffinity(0))
    if kind not in PLACEMENTS:
        raise ValueError(f"unknown placement {kind!r}; valid: {', '.join(PLACEMENTS)}")
    if kind == "any" or len(cpus) < 2 or server_pid is None or not os.path.exists(f"/proc/{server_pid}"):
        return None, None, "any (the scheduler's choice)"
    if kind == "same":
        return {cpus[0]}, {cpus[0]}, f"same (server and clients on CPU {cpus[0]})"
    rest = set(cpus[1:])  # no ", " in the text: it is the value of a "[PEER], Placement, ..." line
    return {cpus[0]}, rest, f"cross (server on CPU {cpus[0]}; clients on CPUs {' '.join(map(str, cpus[1:]))})"


@contextlib.contextmanager
def pinned(pid: int | None, cpus: set[int] | None) -> Iterator[None]:
    """Pin ``pid``'s main thread (Redis' event loop) to ``cpus`` for the block, then restore.
    The server is shared, so it gets its CPUs back however the block ends: a SIGTERM (a
    ``timeout`` around the command) is turned into ``SystemExit`` for the block, so that the
    restore runs before the process ends."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(pid)
    on_term = _exit_on_sigterm()
    os.sched_setaffinity(pid, cpus)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, before)
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)


def _exit_on_sigterm() -> Any:
    """Make SIGTERM raise ``SystemExit`` (in the main thread only, where Python runs signal
    handlers); the handler it replaced, or ``None`` where it could not be set."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, stop)


def pin_self(cpus: set[int] | None) -> None:
    """Pin this process to ``cpus`` (a client's side of a placement); ``None``: leave it."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)


@dataclass
class PeerResult:
    peer_throughput: list[float] = field(default_factory=list)  # rounds + 1 runs
    ours_rounds: list[float] = field(default_factory=list)  # one run per round
    ops: int = 0
    clients: int = 1
    pipeline: int = 1
    value_size: int = 1024
    placement: str = "any"

    @property
    def ratios(self) -> list[float]:
        """Each of our runs against the mean of the peer runs just before and after it."""
        p = self.peer_throughput
        return [ours / ((p[i] + p[i + 1]) / 2) if p[i] + p[i + 1] else 0.0
                for i, ours in enumerate(self.ours_rounds)]

    @property
    def ratio(self) -> float:
        """The median round's ratio: one disturbed round on a shared machine does not decide."""
        return statistics.median(self.ratios) if self.ours_rounds else 0.0

    @property
    def ours_throughput(self) -> float:
        return statistics.median_high(self.ours_rounds) if self.ours_rounds else 0.0

    def document(self, server: str) -> Peer:
        """The ``ckptbench.peer/1`` document of this comparison against ``server``."""
        return Peer(server=server, clients=self.clients, pipeline=self.pipeline, ops=self.ops,
                    value_size=self.value_size, placement=self.placement,
                    peer_throughput=self.peer_throughput, ours_throughput=self.ours_rounds,
                    round_ratios=self.ratios, ratio=self.ratio)


@dataclass(kw_only=True)
class Peer(Document):
    """``ckptbench.peer/1``: the backend against the server's own load tool: every peer run
    (one more than the rounds), each round of ours, each round's ratio and the median's."""

    SCHEMA = "ckptbench.peer/1"

    server: str
    clients: int
    pipeline: int
    ops: int
    value_size: int
    placement: str
    peer_throughput: list[float] = field(default_factory=list)
    ours_throughput: list[float] = field(default_factory=list)
    round_ratios: list[float] = field(default_factory=list)
    ratio: float = 0.0
    environment: Environment = field(default_factory=Environment.here)


def redis_benchmark(host: str, port: int, *, clients: int, pipeline: int, ops: int,
                    value_size: int, keyspace: int, password: str | None = None,
                    cpus: set[int] | None = None) -> float:
    """Throughput (requests/s) of ``redis-benchmark -t set`` with these settings."""
    exe = shutil.which("redis-benchmark")
    if not exe:
        raise BackendUnavailableError(
            "redis-benchmark is not installed; `bench services up redis` installs redis-tools with it"
        )
    cmd = [exe, "-h", host, "-p", str(port), "-t", "set", "-d", str(value_size), "-c", str(clients),
           "-P", str(pipeline), "-n", str(ops), "-r", str(keyspace), "--csv"]
    if password:
        cmd += ["-a", password]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True,
                         preexec_fn=(lambda: pin_self(cpus)) if cpus else None).stdout
    for row in csv.DictReader(io.StringIO(out)):
        if row.get("test") == "SET":
            return float(row["rps"])
    raise RuntimeError(f"could not read redis-benchmark's output: {out!r}")


def _client(args: tuple[dict[str, Any], int, int, int, int, float, set[int] | None]
            ) -> tuple[float, float]:
    """One client process: wait for the common start, then ``ops`` SETs in batches of ``pipeline``."""
    options, ops, pipeline, value_size, offset, start_at, cpus = args
    pin_self(cpus)
    value = os.urandom(value_size)
    with open_backend("redis", **options) as store:
        batches = [[(f"user{offset + i + j}", value) for j in range(min(pipeline, ops - i))]
                   for i in range(0, ops, pipeline)]
        while time.time() < start_at:
            time.sleep(0.001)
        t0 = time.time()
        if pipeline == 1:
            for (item,) in batches:
                store.put(*item)
        else:
            for batch in batches:
                store.put_many(batch)
        return t0, time.time()


def ours(options: dict[str, Any], *, clients: int, pipeline: int, ops: int, value_size: int,
         cpus: set[int] | None = None) -> float:
    """Throughput (keys/s) of ``clients`` processes putting through the backend, started together."""
    per = ops // clients
    start_at = time.time() + 1.0  # every process is connected and ready by then
    jobs = [(options, per, pipeline, value_size, c * per, start_at, cpus) for c in range(clients)]
    with mp.get_context("spawn").Pool(clients) as pool:
        spans = pool.map(_client, jobs)
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    return per * clients / wall if wall > 0 else 0.0


def redis_server_pid(options: dict[str, Any]) -> int | None:
    """The pid of the Redis server behind ``options`` if it runs on this machine, else None."""
    import redis

    host = options.get("host", "127.0.0.1")
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    client = redis.Redis(host=host, port=int(options.get("port", 6379)),
                         password=options.get("password"), socket_timeout=5)
    try:
        return int(client.info("server")["process_id"])
    finally:
        client.close()


def compare_redis(options: dict[str, Any], *, clients: int = 1, pipeline: int = 1,
                  ops: int = 20000, value_size: int = 1024, place: str = "cross",
                  rounds: int = 1) -> PeerResult:
    """redis-benchmark, then ``rounds`` times (our backend, redis-benchmark again): same server,
    connections, pipeline and CPU placement."""
    pid = redis_server_pid(options) if place != "any" else None
    server_cpus, client_cpus, described = placement(place, pid)
    res = PeerResult(ops=ops, clients=clients, pipeline=pipeline, value_size=value_size,
                     placement=described)
    kw = dict(clients=clients, pipeline=pipeline, ops=ops, value_size=value_size, keyspace=ops)
    peer = lambda: redis_benchmark(options.get("host", "127.0.0.1"), int(options.get("port", 6379)),
                                   password=options.get("password"), cpus=client_cpus, **kw)
    with pinned(pid, server_cpus):
        res.peer_throughput.append(peer())
        for _ in range(rounds):
            res.ours_rounds.append(ours(options, clients=clients, pipeline=pipeline, ops=ops,
                                        value_size=value_size, cpus=client_cpus))
            res.peer_throughput.append(peer())
    return res
