"""The S4 word-count checkpoint workload (thesis §4.3, Figs 4.5-4.7) and its lazy/eager recovery.

A paced stream of word events (zipfian over ``pes`` words) drives one word-count PE per word:
each event increments that PE's counter and hands the new state to the S4 SafeKeeper model
(:class:`backends.safekeeper.SafeKeeper`: serialization queue -> bounded drop-oldest storage queue
-> writer threads -> callback).  The callback times every write (``CHECKPOINT-WRITE``); the
SafeKeeper counts drops, which is how the thesis finds the rate a backend sustains.

Events are paced to their **intended** times (``start + i / rate``); ``EVENT-LAG`` records how
late the producer was, so a producer that cannot keep up is visible rather than hidden.

What was durably written last for each PE is known exactly: the SafeKeeper writes through a thin
:class:`_TrackingStore` that remembers each key's last acknowledged value.  Recovery (lazy: one
``get`` per PE in the order the PEs were first used; eager: ``get_many`` prefetch in batches)
compares what it reads with that (:func:`workloads.runner.verify`); the crash and the recovery
are driven by :mod:`experiments.storage.recovery`.
"""

from __future__ import annotations

import pickle
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from . import generators as g
from .measure import Recorder
from .runner import PhaseResult

#: PE key prefix (S4's SafeKeeperId is "<PE prototype>/<key>")
KEY_PREFIX = "WordCountPE/"


@dataclass
class CheckpointSpec:
    """What one checkpoint run does (defaults: the thesis' Figs 4.5/4.6 setting)."""

    rate: float = 400.0  # events/s; 0 = as fast as possible
    events: int = 10_000
    pes: int = 1000
    queue: int = 1000  # storage queue capacity (S4's default)
    serialization_queue: int = 1000  # serialization queue capacity (S4's default)
    writers: int = 1
    skew: float = 0.99  # zipfian constant of the word stream
    seed: int = 1

    def validate(self) -> "CheckpointSpec":
        from .core import WorkloadError

        if self.rate < 0:
            raise WorkloadError(f"--rate must be >= 0 events/s (got {self.rate}); 0 = unpaced")
        if self.events < 1 or self.pes < 1:
            raise WorkloadError("--events and --pes must be >= 1")
        if self.queue < 1 or self.writers < 1 or self.serialization_queue < 1:
            raise WorkloadError("--queue, --serialization-queue and --writers must be >= 1")
        if not 0.0 < self.skew < 1.0 and self.skew != 0.0:
            raise WorkloadError(f"--skew must be 0 (uniform) or in (0, 1) (got {self.skew})")
        return self


def pe_key(word: int) -> str:
    return f"{KEY_PREFIX}word{word}"


def word_stream(spec: CheckpointSpec) -> list[int]:
    """The word (PE index) of every event: zipfian with constant ``skew`` (0 = uniform)."""
    rng = random.Random(f"{spec.seed}/words")
    if spec.skew == 0.0:
        return [rng.randrange(spec.pes) for _ in range(spec.events)]
    if spec.skew == g.ZIPFIAN_CONSTANT:
        gen = g.ZipfianGenerator(0, spec.pes - 1, rng)
    else:
        gen = g.ZipfianGenerator(0, spec.pes - 1, rng, constant=spec.skew)
    return [min(gen.next(), spec.pes - 1) for _ in range(spec.events)]


def first_use_order(words: Iterable[int]) -> list[str]:
    """PE keys in the order the stream first touches them (the order lazy recovery reads them)."""
    seen: dict[int, None] = {}
    for w in words:
        seen.setdefault(w, None)
    return [pe_key(w) for w in seen]


def encode_state(word: int, count: int) -> bytes:
    """A word-count PE's state as S4 would serialize it (~40 bytes with pickle)."""
    return pickle.dumps(("word%d" % word, count), protocol=pickle.HIGHEST_PROTOCOL)


class _TrackingStore:
    """Forwards ``put`` to the real store and remembers the last value acknowledged per key."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.last: dict[str, bytes] = {}

    def put(self, key: str, value: bytes) -> None:
        self.store.put(key, value)
        self.last[key] = value  # only after the store acknowledged it


@dataclass
class CheckpointResult:
    """One checkpoint run: SafeKeeper counts, measurements, and the last value written per PE."""

    spec: CheckpointSpec
    phase: PhaseResult
    submitted: int
    written: int
    dropped: int
    dropped_serialization: int
    failed: int
    #: events/s the producer achieved, and checkpoints/s the writers achieved (incl. the drain)
    event_rate: float
    write_rate: float
    last_written: dict[str, bytes] = field(repr=False, default_factory=dict)
    first_use: list[str] = field(repr=False, default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "spec": asdict(self.spec),
            "submitted": self.submitted,
            "written": self.written,
            "dropped": self.dropped,
            "dropped_serialization": self.dropped_serialization,
            "failed": self.failed,
            "event_rate": self.event_rate,
            "write_rate": self.write_rate,
        }


def run_checkpoint(
    store: Any,
    spec: CheckpointSpec,
    *,
    progress: Callable[[int], None] | None = None,
) -> CheckpointResult:
    """Drive ``spec.events`` paced word events through a SafeKeeper into ``store``; drain; report."""
    from backends.safekeeper import SafeKeeper

    spec.validate()
    words = word_stream(spec)
    tracking = _TrackingStore(store)
    recorder = Recorder()
    rec_lock = threading.Lock()
    errors: dict[str, int] = {}

    def callback(key: str, ok: bool, latency: float, error: BaseException | None) -> None:
        us = int(latency * 1e6)
        with rec_lock:
            if ok:
                recorder.ok("CHECKPOINT-WRITE", us)
            else:
                recorder.failed("CHECKPOINT-WRITE", "ERROR", us)
                text = f"{type(error).__name__}: {error}"
                if text in errors or len(errors) < 5:
                    errors[text] = errors.get(text, 0) + 1

    lag = Recorder()  # producer thread only
    counts = [0] * spec.pes
    perf = time.perf_counter_ns
    interval = int(1e9 / spec.rate) if spec.rate else 0
    keeper = SafeKeeper(tracking, storage_queue=spec.queue, writers=spec.writers,
                        serialization_queue=spec.serialization_queue,
                        serializer=lambda state: encode_state(*state), callback=callback)
    start = perf()
    try:
        for i, w in enumerate(words):
            if interval:
                intended = start + i * interval
                wait = intended - perf()
                if wait > 0:
                    time.sleep(wait / 1e9)
                lag.record("EVENT-LAG", max(0, perf() - intended) // 1000)
            counts[w] += 1
            keeper.checkpoint(pe_key(w), (w, counts[w]))
            if progress is not None and not i & 1023:
                progress(i)
        produced = perf()
    finally:
        stats = keeper.close()  # drains: every queued checkpoint is written
    end = perf()
    if progress is not None:
        progress(len(words))
    measurements = recorder.drain().merge(lag.drain())
    phase = PhaseResult("checkpoint", (end - start) / 1e6, stats.written + stats.failed,
                        measurements, errors)
    return CheckpointResult(
        spec=spec,
        phase=phase,
        submitted=stats.submitted,
        written=stats.written,
        dropped=stats.dropped_storage + stats.dropped_serialization,
        dropped_serialization=stats.dropped_serialization,
        failed=stats.failed,
        event_rate=len(words) / max(produced - start, 1) * 1e9,
        write_rate=stats.written / max(end - start, 1) * 1e9,
        last_written=tracking.last,
        first_use=first_use_order(words),
    )
