"""``bench state-sweep``: how checkpoint, recovery and space grow with the state, per store x layout.

The sweep is a set of ``bench spark`` runs of the word count under ``coordinated``, every key
holding ``--state-bytes`` of state (1 KiB by default), each run a child process of its own
(:mod:`experiments.core.bench_command`: a run that fails or runs out of memory is one failed
point, the others still run, and every run starts with a fresh JVM and leaves nothing behind).  Two sweeps, on every store x layout (a *line*):

* **State size**: the live state ``S`` from :data:`FULL_SIZES` (16 MiB to 4 GiB, x4 apart),
  ``K = S / state-bytes`` keys.  A store that cannot take the largest sizes here stops
  below them (:data:`CAPS`, each with its reason), and so do the stores the full sweep's time
  budget leaves out at its largest size (:data:`BUDGET_CAPS`); the output says so.
* **Dirty fraction**: at one size (:data:`DIRTY_SIZE`), the share of the keys an interval may
  dirty from 0.1 % to 100 % (:data:`DIRTY_FRACTIONS`).  The 100 % point is the size sweep's
  point at that size, not run twice.

Every run is spelled the same way (:func:`argv`), so its figures differ from its neighbours'
only in the state: ``--skew load+hot:1:N`` makes the first ``K`` events visit every key once
(the load, as YCSB's load phase), then sends every event to ``N`` hot keys (key ids ``0..N-1``),
so ``N / K`` of the state is what an interval can dirty (with ``K`` events an interval, an
interval dirties about ``1 - e^(-K/N)`` of the hot keys: all of them for a small ``N``, 63 % for
``N = K``).  Micro-batches of ``K / 2`` events and a checkpoint every 2 of them put the load in
exactly one interval, so the first checkpoint holds the whole state and the next ones its dirty
part; ``4 K`` events make 4 checkpoints.  One failure at event ``2.5 K`` makes the recovery load
the full checkpoint and an increment and replay half an interval; ``--cold-restore`` reads it
from the device, ``--verify`` checks exactly-once.  A file store's directory is put on the local
disk (``--medium local``): the default one lives with the working state in memory.

Spark's own state store is a line too (:data:`SPARK_STATE`): the same runs under the
``spark-state`` baseline, so its checkpoint and recovery grow beside the stores' at equal state.

The sweep's document is written after every point (:mod:`.state_sweep_result`), so a sweep cut
short keeps what it measured; each run's own ``ckptbench.spark`` document and output stay beside
it (``<json stem>/<label>.json`` and ``.log``).  ``--resume`` takes over from that document every
point whose command is, to the character, the one this sweep would run and that succeeded, and
runs the others, and so it does a point whose own document is in place with the same arguments
(:func:`finished_run`: the sweep's document may have been removed, or stopped before it was
rewritten): a sweep of an hour and more on a shared machine can be stopped and continued.
A point taken over says so (:attr:`Point.resumed`: when and at which commit it ran), and so do
the tables, so a curve made of two sittings is never passed off as one.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

from backends import backend_class
from spark_integration.conf import STATE_DIR_ENV, memory_dir
from spark_integration.layouts.registry import layout_names

from experiments.core import results
from experiments.core.bench_command import run_bench
from experiments.spark.state_sweep_result import (DIRTY, SIZE, Conditions, Point, StateSweep,
                                                  binary_size, fit_slopes, percent, sitting)

MiB, GiB = 1 << 20, 1 << 30
#: bytes of state every key holds (``--state-bytes``)
STATE_BYTES = 1024
#: the live state sizes of the full sweep and of ``--quick``
FULL_SIZES = (16 * MiB, 64 * MiB, 256 * MiB, 1 * GiB, 4 * GiB)
QUICK_SIZES = (4 * MiB, 16 * MiB, 64 * MiB)
#: hot keys / keys of the dirty sweep, and the size it runs at
DIRTY_FRACTIONS = (0.001, 0.01, 0.1, 1.0)
QUICK_DIRTY_FRACTIONS = (0.1, 1.0)
#: (64 MiB: every line's dirty points together cost about what one line's 4 GiB point does, so the
#: full sweep stays within about 90 minutes here)
DIRTY_SIZE, QUICK_DIRTY_SIZE = 64 * MiB, 16 * MiB
#: the stores of the full sweep (every layout on indexed_fs, chunks on the others) and of --quick
STORES = ("indexed_fs", "default_fs", "rocksdb", "lmdb", "sqlite", "redis", "minio", "hbase")
QUICK_STORES = ("indexed_fs", "rocksdb", "redis")
LAYOUT = "chunks"
#: Spark's own state store as a line of the sweep (``--stores spark-state``): the same state,
#: schedule and failure under the ``spark-state`` baseline instead of ``coordinated`` on a
#: ckptbench store; its checkpoint is RocksDB's (changelog checkpointing), hence its layout name.
#: ``bench reproduce state-sweep`` runs it as a step of its own beside the stores' sweep.
SPARK_STATE, SPARK_STATE_LAYOUT = "spark-state", "rocksdb"
#: the largest state a store (or a ``store/layout`` line) is given, and why (said in the output
#: and the document): what this machine cannot hold
CAPS: dict[str, tuple[int, str]] = {
    "redis": (1 * GiB, "Redis holds every checkpoint the job keeps in memory (the full one and its "
                       "increments, several times the live state), which at 4 GiB of state would "
                       "not fit in this machine's memory beside the job's own copies"),
}
#: the lines whose largest size the default sizes leave out to keep the full sweep within about
#: 90 minutes here (a run's time grows with its events and state: about 4x at the next size), and
#: why; naming ``--sizes`` runs them at every size given
BUDGET = ("at 4 GiB the full sweep keeps indexed_fs in chunks (the store under test) and rocksdb (the "
          "embedded store a Spark user would pick) to stay within about 90 minutes here; "
          "`--stores STORE --layouts LAYOUT --sizes 1GiB,4GiB` runs another")
BUDGET_CAPS: dict[str, tuple[int, str]] = {
    line: (1 * GiB, BUDGET) for line in ("indexed_fs/per-key", "indexed_fs/changelog", "default_fs", "lmdb",
                                         "sqlite", "minio", "hbase", "spark-state")}
#: micro-batches per checkpoint interval, intervals after the load, the failure's offset in K
BATCHES_PER_INTERVAL = 2
STEADY_INTERVALS = 3
FAIL_AT_K = 2.5
SCHEDULE = (f"K keys, --skew load+hot:1:N, {1 + STEADY_INTERVALS} K events in micro-batches of "
            f"K/{BATCHES_PER_INTERVAL}, a checkpoint every {BATCHES_PER_INTERVAL} (the load is the "
            f"first interval), one failure at event {FAIL_AT_K} K, --cold-restore, --verify; a "
            f"file store's directory on the local disk (--medium local)")
#: seconds one run may take before it is stopped and its point marked failed
FULL_TIMEOUT, QUICK_TIMEOUT = 40 * 60, 10 * 60
#: the largest state ``bench spark``'s own time limit (``--timeout``, ten minutes) is left at:
#: above it a run is given the sweep's limit instead, less a minute for the run to end in.  Spark's
#: own store calls Python once for every key a micro-batch updates, so its runs are the slowest:
#: its limit is half the size
LONG_RUN_BYTES = 1 * GiB


def long_run(store: str, state: int) -> bool:
    """Whether a run of ``state`` bytes on ``store`` may outlast ``bench spark``'s own limit."""
    return state > (LONG_RUN_BYTES // 2 if store == SPARK_STATE else LONG_RUN_BYTES)
#: the fewest keys a point may have (the micro-batches are K/2 events)
MIN_KEYS = 64


@dataclass(frozen=True)
class Plan:
    """What a sweep runs: its lines (store, layout), sizes, dirty fractions and their size."""

    lines: tuple[tuple[str, str], ...]
    sizes: tuple[int, ...]
    dirty: tuple[float, ...]
    dirty_size: int
    state_bytes: int = STATE_BYTES
    quick: bool = False
    #: every default of the full sweep (no option narrowed it): what "the full sweep" means
    full: bool = False
    #: the default sizes: the caps of the full sweep's time budget hold (:data:`BUDGET_CAPS`)
    budget: bool = False

    def keys(self, size: int) -> int:
        """Keys holding ``size`` bytes of state: a multiple of the micro-batches an interval
        has, so the load fills exactly one interval."""
        k = size // self.state_bytes
        return k - k % BATCHES_PER_INTERVAL

    def cap(self, store: str, layout: str) -> tuple[str, int, str] | None:
        """What caps a line, its largest size and why; ``None``: every size.  The budget's caps
        hold only for the default sizes."""
        for key in (f"{store}/{layout}", store):
            for caps in (CAPS, BUDGET_CAPS if self.budget else {}):
                if key in caps:
                    return (key, *caps[key])
        return None

    def capped(self, store: str, layout: str, size: int) -> bool:
        cap = self.cap(store, layout)
        return cap is not None and size > cap[1]

    def points(self) -> list[tuple[str, str, str, int, int]]:
        """``(sweep, store, layout, keys, hot keys)`` in the order they run: every line at one
        size before the next size (so a machine that slows down hits every line alike, and a
        sweep cut short has the small sizes of every line), then the dirty fractions likewise;
        a capped size is left out, and the dirty sweep's 100 % is the size sweep's point."""
        out = []
        for size in sorted(self.sizes):
            for store, layout in self.lines:
                if not self.capped(store, layout, size):
                    k = self.keys(size)
                    out.append((SIZE, store, layout, k, k))
        k = self.keys(self.dirty_size)
        for fraction in sorted(self.dirty):
            for store, layout in self.lines:
                hot = max(1, round(fraction * k))
                if (hot == k and self.dirty_size in self.sizes) or self.capped(store, layout, self.dirty_size):
                    continue
                out.append((DIRTY, store, layout, k, hot))
        return out

    def cap_notes(self) -> list[str]:
        """What was left out for a store or line, and why: one note a reason."""
        left: dict[tuple[int, str], tuple[list[str], list[int]]] = {}
        for store, layout in self.lines:
            cap = self.cap(store, layout)
            sizes = [size for size in self.sizes if cap is not None and size > cap[1]]
            if cap is not None and sizes:
                names, dropped = left.setdefault(cap[1:], ([], []))
                if cap[0] not in names:
                    names.append(cap[0])
                dropped.extend(x for x in sizes if x not in dropped)
        return [f"{', '.join(names)} above {binary_size(limit)} ({', '.join(map(binary_size, sorted(dropped)))}): {why}"
                for (limit, why), (names, dropped) in left.items()]


def default_lines(stores: list[str], layouts: list[str] | None,
                  quick: bool = False) -> tuple[tuple[str, str], ...]:
    """Every layout on indexed_fs and chunks on the other stores (``quick``: chunks on every
    store), unless ``layouts`` names the layouts every store runs; Spark's own state store has
    its one."""
    out = []
    for store in stores:
        if store == SPARK_STATE:
            out.append((SPARK_STATE, SPARK_STATE_LAYOUT))
            continue
        for layout in layouts or ([LAYOUT] + [x for x in layout_names() if x != LAYOUT]
                                  if store == "indexed_fs" and not quick else [LAYOUT]):
            out.append((store, layout))
    return tuple(dict.fromkeys(out))


def plan(quick: bool = False, stores: list[str] | None = None, layouts: list[str] | None = None,
         sizes: list[int] | None = None, dirty: list[float] | None = None, dirty_size: int | None = None,
         state_bytes: int = STATE_BYTES) -> Plan:
    """The sweep the options ask for; ``None``: the full or quick default.  Spark's own state
    store alone is a full sweep too: its line at every size and fraction of the full one."""
    full = (not quick and (stores is None or stores == [SPARK_STATE])
            and layouts is sizes is dirty is dirty_size is None and state_bytes == STATE_BYTES)
    stores = stores or list(QUICK_STORES if quick else STORES)
    return Plan(lines=default_lines(stores, layouts, quick),
                sizes=tuple(sorted(set(sizes or (QUICK_SIZES if quick else FULL_SIZES)))),
                dirty=tuple(sorted(set(dirty if dirty is not None else
                                       (QUICK_DIRTY_FRACTIONS if quick else DIRTY_FRACTIONS)))),
                dirty_size=dirty_size or (QUICK_DIRTY_SIZE if quick else DIRTY_SIZE),
                state_bytes=state_bytes, quick=quick, full=full, budget=not quick and sizes is None)


def argv(store: str, layout: str, keys: int, hot: int, state_bytes: int, document: str) -> list[str]:
    """The ``bench`` arguments of one point (see the module doc for why each); Spark's own
    state store keeps its checkpoint location on the local disk as a file store does."""
    batch = keys // BATCHES_PER_INTERVAL
    on_disk = store == SPARK_STATE or backend_class(store).keeps_a_directory()
    return ["spark", "--job", "wordcount", "--protocol",
            *(["spark-state"] if store == SPARK_STATE else ["coordinated", "--backend", store, "--layout", layout]),
            "--state-bytes", str(state_bytes), "--keys", str(keys),
            "--skew", f"load+hot:1:{hot}", "--events", str((1 + STEADY_INTERVALS) * keys),
            "--batch", str(batch), "--interval", str(BATCHES_PER_INTERVAL),
            "--fail-at", str(int(FAIL_AT_K * keys)), "--cold-restore", "--verify",
            *(["--medium", "local"] if on_disk else []),
            *(["--timeout", str(FULL_TIMEOUT - 60)] if long_run(store, keys * state_bytes) else []),
            "--json", document]


def protocols(lines: tuple[tuple[str, str], ...]) -> str:
    """What checkpointed the state of ``lines``: coordinated on a store, Spark's own store, both."""
    spark_state = any(store == SPARK_STATE for store, _ in lines)
    stores = any(store != SPARK_STATE for store, _ in lines)
    return "; ".join((["coordinated"] if stores else [])
                     + (["spark-state (Spark's RocksDB state store, changelog checkpointing)"] if spark_state else []))


def label(sweep: str, store: str, layout: str, keys: int, hot: int, state_bytes: int) -> str:
    size = binary_size(keys * state_bytes).replace(" ", "")
    return (f"{store}-{layout}-{size}" if sweep == SIZE else
            f"{store}-{layout}-{size}-hot{percent(hot / keys).replace(' ', '')}")


def memory_bytes() -> int | None:
    """The machine's memory (``MemTotal``), against which a bend can be read."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_run(path: str) -> tuple[dict, float | None]:
    """A run's ``[SPARK]`` lines and load average, from its own document at ``path``."""
    with open(path, encoding="utf-8") as fh:
        return _run_figures(json.load(fh))


def _run_figures(doc: dict) -> tuple[dict, float | None]:
    """A run document's ``[SPARK]`` lines and the 1-minute load average when it ended (from its
    environment): how busy the shared machine was while it ran."""
    load = (doc.get("environment") or {}).get("loadavg") or [None]
    return dict(doc.get("metrics") or {}), load[0]


def run_point(sweep: str, store: str, layout: str, keys: int, hot: int, state_bytes: int,
              points_dir: str, timeout: float) -> Point:
    """One ``bench spark`` run as a child process; its point (``error``: its one line)."""
    name = label(sweep, store, layout, keys, hot, state_bytes)
    document, log = os.path.join(points_dir, f"{name}.json"), os.path.join(points_dir, f"{name}.log")
    args = argv(store, layout, keys, hot, state_bytes, document)
    if os.path.exists(document):
        os.remove(document)  # a document left by an earlier sweep must not pass for this run
    # the run's working state in a directory of its own, removed after it: a run stopped at its
    # time limit cannot clean up, and gigabytes of it left in memory would starve the next runs
    # (the store's checkpoints, which a failed run keeps, are elsewhere: --medium local, a server)
    working = tempfile.mkdtemp(prefix="ckptbench-sweep-", dir=memory_dir())
    try:
        ran = run_bench(args, log, timeout, env={STATE_DIR_ENV: working})
    finally:
        shutil.rmtree(working, ignore_errors=True)
    point = Point(sweep, store, layout, keys, hot, keys * state_bytes, "bench " + shlex.join(args),
                  ran.seconds, ran.error, document=document, log=log)
    if ran.error is None:
        if not os.path.exists(document):
            point.error = f"it wrote no {document}"
        else:
            point.metrics, point.loadavg = _read_run(document)
            point.state_bytes = int(point.metrics.get("StateBytes") or point.state_bytes)
    return point


def points_directory(json_path: str) -> str:
    """Where the runs' own documents and logs go: beside the sweep's JSON, in a directory named
    after it (``results/state-sweep.json`` -> ``results/state-sweep/``)."""
    stem = json_path[:-5] if json_path.endswith(".json") else json_path + ".d"
    return stem


class ResumeError(ValueError):
    """``--resume`` cannot read the earlier sweep's document (one line, the fix)."""


def earlier_points(json_path: str) -> dict[str, Point]:
    """The succeeded points of the sweep document at ``json_path`` by command, each marked with
    when and at which commit it ran; none when there is no document yet."""
    if not os.path.exists(json_path):
        return {}
    try:
        with open(json_path, encoding="utf-8") as fh:
            doc = StateSweep.from_json(json.load(fh))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResumeError(f"--resume: {json_path} is not a state-sweep document ({exc.__class__.__name__}: "
                          f"{exc}); move it away or run without --resume") from None
    when = sitting(doc.environment.time, doc.environment.commit)
    out = {}
    for point in doc.points:
        if point.ok and os.path.exists(point.document):
            point.resumed = point.resumed or when
            if point.loadavg is None:
                point.loadavg = _read_run(point.document)[1]
            out[point.command] = point
    return out


def finished_run(sweep: str, store: str, layout: str, keys: int, hot: int, args: list[str]) -> Point | None:
    """The point of a run whose own document is in place with exactly these arguments, though
    the sweep's document no longer lists it (a sweep stopped before it wrote it, or its document
    was removed): the run's document is what it measured; ``None`` when there is none.  A run
    writes its document only when it finished (and the sweep removes it before a run starts); one
    that finished with exactly-once broken exited as failed and is run again."""
    document = args[args.index("--json") + 1]
    try:
        with open(document, encoding="utf-8") as fh:
            ran = json.load(fh)
    except (OSError, ValueError):
        return None
    env = ran.get("environment") or {}
    if list(env.get("argv") or [])[1:] != args or not ran.get("metrics") or ran["metrics"].get("ExactlyOnce") is False:
        return None  # another command's, or a run that exited with its exactly-once check failed
    metrics, load = _run_figures(ran)
    return Point(sweep, store, layout, keys, hot, int(metrics.get("StateBytes") or 0), "bench " + shlex.join(args),
                 float(metrics.get("WallTime(s)") or 0.0), metrics=metrics, document=document,
                 log=document[:-5] + ".log", resumed=sitting(env.get("time"), env.get("commit")), loadavg=load)


def run(p: Plan, json_path: str, echo: Callable[[str], None] = lambda _: None,
        resume: bool = False) -> StateSweep:
    """Every point of ``p`` in order, the document rewritten at ``json_path`` after each;
    ``resume``: the points the document there already holds (:func:`earlier_points`) are
    taken over, not run again."""
    earlier = earlier_points(json_path) if resume else {}
    points_dir = points_directory(json_path)
    os.makedirs(points_dir, exist_ok=True)
    doc = StateSweep(quick=p.quick, full=p.full, lines=[f"{s}/{lay}" for s, lay in p.lines], conditions=Conditions(
        job="wordcount", protocol=protocols(p.lines), state_bytes_per_key=p.state_bytes,
        sizes=[p.keys(s) * p.state_bytes for s in sorted(p.sizes)], dirty=sorted(p.dirty),
        dirty_size=p.keys(p.dirty_size) * p.state_bytes, schedule=SCHEDULE, caps=p.cap_notes(),
        memory_bytes=memory_bytes()))
    todo = p.points()
    t0 = time.monotonic()
    for i, (sweep, store, layout, keys, hot) in enumerate(todo, 1):
        name = label(sweep, store, layout, keys, hot, p.state_bytes)
        args = argv(store, layout, keys, hot, p.state_bytes, os.path.join(points_dir, f"{name}.json"))
        taken = earlier.get("bench " + shlex.join(args))
        if taken is None and resume:
            taken = finished_run(sweep, store, layout, keys, hot, args)
        if taken is not None:
            doc.points.append(taken)
            echo(f"state-sweep [{i}/{len(todo)}] {store}/{layout} {binary_size(keys * p.state_bytes)}: "
                 f"taken over from {taken.resumed}")
            continue
        point = run_point(sweep, store, layout, keys, hot, p.state_bytes, points_dir,
                          QUICK_TIMEOUT if p.quick else FULL_TIMEOUT)
        doc.points.append(point)
        doc.slopes = fit_slopes(doc)
        doc.seconds = round(time.monotonic() - t0, 1)
        results.write_json(json_path, doc)
        what = binary_size(keys * p.state_bytes) + ("" if sweep == SIZE else f", {percent(hot / keys)} hot")
        echo(f"state-sweep [{i}/{len(todo)}] {store}/{layout} {what}: "
             + (f"failed in {point.seconds:.0f} s: {point.error}" if point.error else f"ok in {point.seconds:.0f} s"))
    doc.slopes = fit_slopes(doc)
    doc.seconds = round(time.monotonic() - t0, 1)
    results.write_json(json_path, doc)  # also when every point was taken over
    return doc
