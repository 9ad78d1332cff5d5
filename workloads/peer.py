"""Side-by-side runs of a backend and the server's own load tool, in one invocation.

A backend is only as honest as its overhead is small: ``redis-benchmark -t set`` is the floor for
the Redis backend (same server, same value size, same number of connections and pipeline depth).
The peer runs before *and* after our clients and the ratio uses the mean of the two peer runs, so
drift on this shared machine hits both sides.
"""

from __future__ import annotations

import csv
import io
import multiprocessing as mp
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from backends import BackendUnavailableError, open_backend


@dataclass
class PeerResult:
    peer_throughput: list[float] = field(default_factory=list)
    ours_throughput: float = 0.0
    ops: int = 0
    clients: int = 1
    pipeline: int = 1
    value_size: int = 1024

    @property
    def ratio(self) -> float:
        peer = sum(self.peer_throughput) / len(self.peer_throughput)
        return self.ours_throughput / peer if peer else 0.0


def redis_benchmark(host: str, port: int, *, clients: int, pipeline: int, ops: int,
                    value_size: int, keyspace: int, password: str | None = None) -> float:
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
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    for row in csv.DictReader(io.StringIO(out)):
        if row.get("test") == "SET":
            return float(row["rps"])
    raise RuntimeError(f"could not read redis-benchmark's output: {out!r}")


def _client(args: tuple[dict[str, Any], int, int, int, int, float]) -> tuple[float, float]:
    """One client process: wait for the common start, then ``ops`` SETs in batches of ``pipeline``."""
    options, ops, pipeline, value_size, offset, start_at = args
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


def ours(options: dict[str, Any], *, clients: int, pipeline: int, ops: int, value_size: int) -> float:
    """Throughput (keys/s) of ``clients`` processes putting through the backend, started together."""
    per = ops // clients
    start_at = time.time() + 1.0  # every process is connected and ready by then
    jobs = [(options, per, pipeline, value_size, c * per, start_at) for c in range(clients)]
    with mp.get_context("spawn").Pool(clients) as pool:
        spans = pool.map(_client, jobs)
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    return per * clients / wall if wall > 0 else 0.0


def compare_redis(options: dict[str, Any], *, clients: int = 1, pipeline: int = 1,
                  ops: int = 20000, value_size: int = 1024) -> PeerResult:
    """redis-benchmark, our backend, redis-benchmark again: same server, connections, pipeline."""
    res = PeerResult(ops=ops, clients=clients, pipeline=pipeline, value_size=value_size)
    kw = dict(clients=clients, pipeline=pipeline, ops=ops, value_size=value_size, keyspace=ops)
    peer = lambda: redis_benchmark(options.get("host", "127.0.0.1"), int(options.get("port", 6379)),
                                   password=options.get("password"), **kw)
    res.peer_throughput.append(peer())
    res.ours_throughput = ours(options, clients=clients, pipeline=pipeline, ops=ops,
                               value_size=value_size)
    res.peer_throughput.append(peer())
    return res
