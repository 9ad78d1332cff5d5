"""A replayable, deterministic streaming source (PySpark Python Data Source API).

Event ``i`` is a pure function of ``(seed, i)``: a counter-based hash (:mod:`.counter_random`)
turns the pair into uniform numbers, which become a skewed key (:mod:`.skew`: zipfian or hot set) and, for NexMark,
the rest of a bid, person or auction (:mod:`.nexmark`).  So
any offset range can be regenerated at any time, on any machine, vectorized with numpy — which is
what makes the protocols' replay ("rewind the source to offset X") and the ground truth in
:mod:`spark_integration.verify` possible without storing the input.

Offsets are event sequence numbers: ``{"seq": n}`` means events ``[0, n)`` have been offered.
With ``rate`` > 0, event ``i`` becomes available at ``t0 + i / rate``, ``t0`` being the query's
first offset request (so Spark's query start-up creates no backlog; the driver derives ``t0``
from its first micro-batch); with ``rate`` = 0 everything is available at once.  Each
micro-batch takes at most ``maxEventsPerBatch`` events.

Schemas (``key`` is always the grouping key, so one keyed operator serves every job):
  * ``wordcount``: ``seq long, key long`` — ``key`` is the word id (word text would be ``w<key>``).
  * ``bids`` (NexMark bids only): ``seq long, key long, bidder long, price long`` — ``key`` is the
    auction.
  * ``nexmark`` (NexMark's mixed stream: 1 person, 3 auctions, 46 bids per 50 events):
    ``seq long, key long, etype long, id long, attr long`` — see :mod:`.nexmark`.

Use it as ``spark.dataSource.register(CkptSource)`` then
``spark.readStream.format("ckptbench").options(**source_options(...)).load()``; the same format
read as a batch with ``start``/``end`` options gives the replay of an offset range.

**A tap** (the ``tap`` option, :func:`tap_option`) is what a job does to the events before the
shuffle, run where they are made: a callable ``(sender, batches) -> batches`` given each source
partition's Arrow batches and its index, the *sender*.  A query's filter or map
(:attr:`.queries.Query.select`) and a protocol's message log (:mod:`.protocols.sender_log`) run
there instead of in a ``mapInArrow`` stage of their own, which would ship every event from the JVM
to a Python worker and back once more.  The read of a partition ends when the tap's generator
returns, so whatever the tap does before it returns (the log's flush) is done before the task
succeeds, and so before the shuffle hands any of its events to the next stage.
"""

from __future__ import annotations

import base64
import functools
import pickle
import time
from typing import Any, Callable, Iterator

import numpy as np

from . import nexmark
from .counter_random import uniform
from .errors import SparkIntegrationError
from .skew import Skew, parse_skew, ranks
from .spark_hash import destinations

KINDS = ("wordcount", "bids", "nexmark")
SCHEMAS = {
    "wordcount": "seq long, key long",
    "bids": "seq long, key long, bidder long, price long",
    "nexmark": nexmark.SCHEMA,
}

def skewed_keys(seed: int, stream: int, seq: np.ndarray, keys: int, skew: "Skew | float | str") -> np.ndarray:
    """Key ids in ``[0, keys)`` distributed per ``skew`` (rank r = key id r)."""
    skew = parse_skew(skew)
    v = uniform(seed, stream + 100, seq) if skew.is_hot else None
    out = ranks(skew, keys, uniform(seed, stream, seq), v)
    if skew.load:  # the load phase: event i < keys visits key i
        loading = seq < keys
        out[loading] = seq[loading]
    return out


def generate(kind: str, seed: int, keys: int, skew: "Skew | float | str", start: int, end: int) -> dict[str, np.ndarray]:
    """Columns of events ``[start, end)`` — the single definition of the input."""
    seq = np.arange(start, end, dtype=np.int64)
    if kind == "nexmark":
        skew = parse_skew(skew)
        if skew.load:
            raise SparkIntegrationError(f"skew {skew}: a load phase is for the keyed counts (wordcount, "
                                        f"nexmark-bids); NexMark creates its persons and auctions as it goes")
        return nexmark.generate(seed, keys, skew, seq)
    cols = {"seq": seq, "key": skewed_keys(seed, 1, seq, keys, skew)}
    if kind == "bids":
        cols["bidder"] = (uniform(seed, 2, seq) * (keys * 10)).astype(np.int64)
        # prices: a long-tailed distribution between 1 and ~10^4 (NexMark prices are skewed too)
        cols["price"] = (np.exp(uniform(seed, 3, seq) * 9.2)).astype(np.int64) + 1
    elif kind != "wordcount":
        raise SparkIntegrationError(f"unknown event kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    return cols


#: a tap: ``(sender, batches) -> batches`` (module doc)
Tap = Callable[[int, Iterator[Any]], Iterator[Any]]


def tap_option(tap: Tap) -> str:
    """The ``tap`` option's text for ``tap`` (Spark options are strings): the callable pickled,
    so it must be a module-level function or a ``functools.partial`` of one with plain data."""
    return base64.b64encode(pickle.dumps(tap)).decode("ascii")


def _untap(text: str) -> Tap:
    return pickle.loads(base64.b64decode(text))


def _select_then(select: Callable[[Iterator[Any]], Iterator[Any]] | None, stage: Tap | None,
                 sender: int, batches: Iterator[Any]) -> Iterator[Any]:
    if select is not None:
        batches = select(batches)
    return batches if stage is None else stage(sender, batches)


def chain(select: Callable[[Iterator[Any]], Iterator[Any]] | None = None, stage: Tap | None = None) -> Tap | None:
    """The tap running a query's ``select`` (a ``mapInArrow`` body) and then a sender ``stage``
    (a tap); None when there is neither."""
    if select is None and stage is None:
        return None
    return functools.partial(_select_then, select, stage)


def source_options(
    kind: str,
    events: int,
    keys: int,
    skew: "Skew | float | str",
    seed: int = 42,
    rate: float = 0.0,
    max_batch: int = 200_000,
    partitions: int = 2,
) -> dict[str, str]:
    """The ``.options(...)`` of a streaming read (Spark options are strings)."""
    return {
        "kind": kind,
        "events": str(events),
        "keys": str(keys),
        "skew": str(parse_skew(skew)),
        "seed": str(seed),
        "rate": str(rate),
        "maxEventsPerBatch": str(max_batch),
        "numPartitions": str(partitions),
    }


class _Params:
    """The parsed options, shared by the batch and the stream reader."""

    def __init__(self, options: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}  # Spark options are case-insensitive
        self.kind = options.get("kind", "wordcount")
        if self.kind not in KINDS:
            raise SparkIntegrationError(f"source option kind={self.kind!r}; valid kinds: {', '.join(KINDS)}")
        self.events = int(options.get("events", "1000000"))
        self.keys = int(options.get("keys", "10000"))
        self.skew = parse_skew(options.get("skew", "1.0"))
        self.seed = int(options.get("seed", "42"))
        self.rate = float(options.get("rate", "0"))
        self.max_batch = int(options.get("maxeventsperbatch", "200000"))
        self.partitions = max(1, int(options.get("numpartitions", "2")))
        self.start = int(options.get("start", "0"))
        self.end = int(options.get("end", str(self.events)))
        self.tap = _untap(options["tap"]) if options.get("tap") else None

    def split(self, start: int, end: int) -> list:
        """The partitions of ``[start, end)``: ``(start, end, sender)``, the sender its index."""
        from pyspark.sql.datasource import InputPartition

        n = max(1, min(self.partitions, end - start))
        bounds = np.linspace(start, end, n + 1).astype(np.int64)
        return [InputPartition((int(a), int(b), i)) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]

    def read(self, partition: Any) -> Iterator[Any]:
        start, end, sender = partition.value
        batches = self._generate(start, end)
        return batches if self.tap is None else self.tap(sender, batches)

    def _generate(self, start: int, end: int) -> Iterator[Any]:
        import pyarrow as pa

        chunk = 1 << 16
        for a in range(start, end, chunk):
            cols = generate(self.kind, self.seed, self.keys, self.skew, a, min(end, a + chunk))
            yield pa.RecordBatch.from_pydict(cols)


def read_here(options: dict[str, str], start: int, end: int, tap: Tap | None = None) -> Iterator[Any]:
    """Events ``[start, end)`` of the source ``options`` describe, through ``tap``, as a batch read
    of it gives them (the same partitions, senders and tap), made in this process: for a driver
    that needs to know what a read holds (how many events each instance gets) without a job."""
    params = _Params(dict(options, start=str(start), end=str(end)))
    params.tap = tap
    for partition in params.split(start, end):
        yield from params.read(partition)


def events_per_instance(options: dict[str, str], start: int, end: int, tap: Tap | None,
                        parallelism: int) -> dict[int, int]:
    """How many of :func:`read_here`'s events ``repartition(parallelism, "key")`` sends to each
    instance (instances that get none left out), counted here, with no job."""
    keys = [rb.column("key").to_numpy() for rb in read_here(options, start, end, tap)]
    if not keys:
        return {}
    counts = np.bincount(destinations(np.concatenate(keys), parallelism), minlength=parallelism)
    return {d: int(n) for d, n in enumerate(counts) if n}


def _make_classes():
    """Build the Data Source classes lazily, so importing this module never needs pyspark."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    class CkptBatchReader(DataSourceReader):
        def __init__(self, params: _Params) -> None:
            self.p = params

        def partitions(self):
            return self.p.split(self.p.start, self.p.end)

        def read(self, partition):
            return self.p.read(partition)

    class CkptStreamReader(DataSourceStreamReader):
        def __init__(self, params: _Params) -> None:
            self.p = params
            self.t0: float | None = None  # pacing starts at the first offset request

        def initialOffset(self) -> dict:
            return {"seq": self.p.start}

        def getDefaultReadLimit(self):
            return ReadMaxRows(self.p.max_batch)

        def _available(self) -> int:
            if self.p.rate <= 0:
                return self.p.events
            if self.t0 is None:
                self.t0 = time.time()
            return min(self.p.events, int((time.time() - self.t0) * self.p.rate))

        def latestOffset(self, start: dict, limit) -> dict:
            begin = int(start["seq"])
            end = self._available()
            if isinstance(limit, ReadMaxRows):
                end = min(end, begin + limit.max_rows)
            elif not isinstance(limit, ReadAllAvailable):
                end = min(end, begin + self.p.max_batch)
            return {"seq": max(begin, end)}

        def reportLatestOffset(self) -> dict:
            return {"seq": self._available()}

        def partitions(self, start: dict, end: dict):
            return self.p.split(int(start["seq"]), int(end["seq"]))

        def read(self, partition):
            return self.p.read(partition)

        def commit(self, end: dict) -> None:
            pass

    class CkptSource(DataSource):
        """``format("ckptbench")``: deterministic word-count / NexMark events."""

        @classmethod
        def name(cls) -> str:
            return "ckptbench"

        def schema(self) -> str:
            return SCHEMAS[_Params(dict(self.options)).kind]

        def reader(self, schema):
            return CkptBatchReader(_Params(dict(self.options)))

        def streamReader(self, schema):
            return CkptStreamReader(_Params(dict(self.options)))

    return CkptSource


def __getattr__(name: str):
    if name == "CkptSource":
        cls = _make_classes()
        globals()["CkptSource"] = cls
        return cls
    raise AttributeError(name)
