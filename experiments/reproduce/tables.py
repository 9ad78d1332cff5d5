"""Markdown of the ``bench reproduce`` experiments on the project's own stores: one table and one
headline each.

``store-write``, ``store-scaling``, ``store-reopen``, ``harness``, ``checkpoint-drops``, the
backends side by side (``backends``, ``embedded-peers``) and the Redis client beside its peer
tool (``peer-redis``): experiments that are compositions of ``bench`` runs, so their tables live
with ``reproduce``; an experiment with a module of its own (the thesis' figures, storage-compare,
the Spark matrix, CheckMate, LOG.io's stragglers, the audit) keeps its table and headline beside
its result type.  Every function here reads only the JSON documents the
experiment's ``bench`` commands wrote (keyed by the step label of :mod:`experiments.reproduce.run`),
so ``docs/results.md`` and the README summary can be rebuilt from ``results/*.json`` at any time,
and a figure in the docs is always one a command really printed into its document.  A document
missing a field raises: the caller reports the experiment as failed rather than publishing a
half-empty table.
"""

from __future__ import annotations

import statistics
from typing import Any, TypeVar

from experiments.core.document import Document
from experiments.core.results import (CheckpointSummary, Compare, OpStats, Reopen, Result, Sweep,
                                      read_run, sweep_ratios)
from experiments.core.format import Runs, md_table, num, target, times
from experiments.storage.binding_peer import BindingPeer
from experiments.storage.peers import Peer

D = TypeVar("D", bound=Document)


def _as(tp: type[D], runs: Runs) -> list[D]:
    """The commands' documents as ``tp`` (which refuses a document of another schema)."""
    return [tp.from_json(doc) for doc in runs.values()]


# The project's targets (docs/results.md, "Targets"): goals stated in advance, not measurements.
PUT_OVER_PYTHON_LOOP = 1.0  # 1-thread durable puts over the bare fdatasync loop in Python
GROUP_COMMIT_SCALING = 5.0  # indexed_fs, 16 threads over 1
INDEXED_OVER_DEFAULT = 10.0  # indexed_fs over default_fs at 16 threads
REOPEN_KEYS, REOPEN_CLEAN_MS, REOPEN_CRASH_MS = 1_000_000, 250.0, 3000.0
HARNESS_OPS, HARNESS_TWO_PROCESSES = 100_000.0, 1.6
# embedded-peers: indexed_fs against RocksDB, LMDB and SQLite
PEER_WRITE_LEAD = 4.0  # indexed_fs over the best peer, 16 threads of durable puts
GETS_KEYS, GETS_OVER = 100_000, {"rocksdb": 1.2, "lmdb": 1.0}  # indexed_fs over each, random gets
PEER_CRASH_MS, PEER_CRASH_OVER_CLEAN = 300.0, 3.0  # indexed_fs reopen after SIGKILL
# peer-redis: bench run's YCSB workload over a client doing what YCSB's Redis binding does
OVER_BINDING = 1.0


# -------------------------------------------------------------------------------- store-write
def store_write(runs: Runs) -> list[str]:
    rows = []
    for doc in _as(Result, runs):
        op, base = doc.run.busiest(), doc.baseline
        native = base.native if base else None
        goal = ""
        if doc.backend == "indexed_fs" and doc.config["threads"] == 1 and base and base.ratio:
            goal = target(base.ratio >= PUT_OVER_PYTHON_LOOP,
                          f"≥ {PUT_OVER_PYTHON_LOOP}x Python loop")
        rows.append([doc.backend, str(doc.config["threads"]), num(doc.run.operations_done),
                     num(doc.run.throughput_ops_sec), num(op.p50_us),
                     num(op.p99_us), num(base.throughput_ops_sec if base else None),
                     times(base.ratio if base else None),
                     num(native.throughput if native else None),
                     times(native.ratio if native else None), goal])
    return md_table(["backend", "threads", "puts", "puts/s", "p50 µs", "p99 µs",
                     "fdatasync loop (Python) puts/s", "x Python loop",
                     "fdatasync loop (C) puts/s", "x C loop", "target"], rows)


def store_write_headline(runs: Runs) -> str:
    parts = []
    for doc in _as(Result, runs):
        native = doc.baseline.native if doc.baseline else None
        parts.append(f"{doc.backend} x{doc.config['threads']} "
                     f"{num(doc.run.throughput_ops_sec)} ({times(native.ratio if native else None)})")
    return "durable puts/s (x the C fdatasync loop): " + ", ".join(parts)


# ------------------------------------------------------------------------------ store-scaling
def _cpus(doc: Sweep) -> str:
    asked = (doc.config or {}).get("cpus")
    allowed = doc.environment.cpus_allowed
    if not asked:
        return "unpinned"
    return f"{asked} (CPU {' '.join(map(str, allowed))})"


def _medians(doc: Sweep) -> dict[tuple[str, int], list[float]]:
    out: dict[tuple[str, int], list[float]] = {}
    for e in doc.results:
        if not e.skipped and e.params.threads is not None:
            out.setdefault((e.backend, e.params.threads), []).append(e.throughput_ops_sec)
    return out


def store_scaling(runs: Runs) -> list[str]:
    rows = []
    for doc in _as(Sweep, runs):
        cpus = _cpus(doc)
        for (backend, threads), values in _medians(doc).items():
            rows.append([cpus, f"{backend} puts/s, {threads} thread{'s' * (threads > 1)}",
                         num(statistics.median(values)), " ".join(num(v) for v in values), ""])
        goals = {"indexed_fs threads 16/1": GROUP_COMMIT_SCALING,
                 "indexed_fs/default_fs threads 16": INDEXED_OVER_DEFAULT}
        for r in doc.ratios or sweep_ratios(doc.results):
            goal = goals.get(r.what)
            rows.append([cpus, r.what, times(r.median), " ".join(f"{v:.2f}" for v in r.rounds),
                         target(r.median >= goal, f"≥ {goal:g}x") if goal else ""])
    return md_table(["CPUs", "measure", "median", "each round", "target"], rows)


def store_scaling_headline(runs: Runs) -> str:
    """The first backend's scaling and the backends' ratio at the most threads, per placement
    (:func:`experiments.core.results.sweep_ratios` lists them first and last)."""
    parts = []
    for doc in _as(Sweep, runs):
        ratios = doc.ratios or sweep_ratios(doc.results)
        if ratios:
            parts.append(f"{_cpus(doc)}: {ratios[0].what} {times(ratios[0].median)}, "
                         f"{ratios[-1].what} {times(ratios[-1].median)}")
    return "medians of interleaved rounds, " + "; ".join(parts)


# ------------------------------------------------------------------------------- store-reopen
def store_reopen(runs: Runs) -> list[str]:
    rows = []
    for doc in _as(Result, runs):
        rec, stats = _reopen(doc), doc.backend_stats or {}
        scanned = stats.get("records_scanned")
        index = (f"snapshot {stats['snapshot_used']}" if stats.get("snapshot_used")
                 else f"scan of {num(scanned)} records" if scanned is not None else "-")
        bound = REOPEN_CRASH_MS if rec.crash else REOPEN_CLEAN_MS
        goal = (target(rec.open_ms <= bound, f"≤ {num(bound)} ms")
                if doc.config["records"] == REOPEN_KEYS else f"set for {num(REOPEN_KEYS)} keys")
        rows.append(["SIGKILL" if rec.crash else "clean close", num(doc.config["records"]),
                     num(rec.open_ms), index, num(doc.run.operations_done),
                     str(rec.missing), str(rec.corrupt), goal])
    return md_table(["reopen after", "keys", "open ms", "index from", "keys read back",
                     "missing", "corrupt", "target"], rows)


def store_reopen_headline(runs: Runs) -> str:
    by = {("crash" if _reopen(d).crash else "clean"): _reopen(d) for d in _as(Result, runs)}
    keys = num(_as(Result, runs)[0].config["records"])
    return (f"{keys} keys: reopen in {num(by['clean'].open_ms)} ms after a clean "
            f"close, {num(by['crash'].open_ms)} ms after SIGKILL")


def _reopen(doc: Result) -> Reopen:
    """A ``bench recovery`` document's reopen (a KeyError for any other run, as a table of the
    wrong documents should fail)."""
    if doc.recovery is None:
        raise KeyError("recovery")
    return doc.recovery


# ------------------------------------------------------------------------------------ harness
def harness(runs: Runs) -> list[str]:
    rows, first = [], None
    for doc in _as(Result, runs):
        op, tput = doc.run.busiest(), doc.run.throughput_ops_sec
        processes = doc.config.get("processes") or 1
        if first is None:
            first = tput
            goal = target(tput >= HARNESS_OPS, f"≥ {num(HARNESS_OPS)} ops/s")
        else:
            goal = target(tput >= HARNESS_TWO_PROCESSES * first, f"≥ {HARNESS_TWO_PROCESSES}x")
        rows.append([str(processes), str(doc.config["threads"]),
                     num(doc.run.operations_done), num(tput), times(tput / first),
                     num(op.p50_us), num(op.p99_us), goal])
    return md_table(["processes", "threads", "ops", "ops/s", "x 1 process", "p50 µs", "p99 µs",
                     "target"], rows)


def harness_headline(runs: Runs) -> str:
    return "memory backend: " + ", ".join(
        f"{num(d.run.throughput_ops_sec)} ops/s with {d.config.get('processes') or 1} "
        f"process{'es' * ((d.config.get('processes') or 1) > 1)}" for d in _as(Result, runs))


# --------------------------------------------------------------------------- checkpoint-drops
def checkpoint_drops(runs: Runs) -> list[str]:
    rows = []
    for doc in _as(Result, runs):
        ck = _checkpoint(doc)
        w = doc.run.operations.get("CHECKPOINT-WRITE") or OpStats()
        rows.append([doc.backend, num(ck.spec.rate), num(ck.submitted), num(ck.written),
                     num(ck.dropped), num(ck.write_rate), num(w.p50_us), num(w.p99_us)])
    return md_table(["backend", "events/s offered", "checkpoints", "written", "dropped",
                     "written/s", "write p50 µs", "write p99 µs"], rows)


def checkpoint_drops_headline(runs: Runs) -> str:
    docs = _as(Result, runs)
    return ", ".join(f"{d.backend} dropped {num(_checkpoint(d).dropped)} of "
                     f"{num(_checkpoint(d).submitted)}" for d in docs) + (
        f" at {num(_checkpoint(docs[0]).spec.rate)} events/s")


def _checkpoint(doc: Result) -> CheckpointSummary:
    if doc.checkpoint is None:
        raise KeyError("checkpoint")
    return doc.checkpoint


# ----------------------------------------------------------------------------------- backends
def backends(runs: Runs) -> list[str]:
    (doc,) = _as(Compare, runs)
    ran = [e for e in doc.results if not e.skipped]
    ops = sorted({n for e in ran for n in e.ran()})
    base = ran[0].throughput_ops_sec if ran else None
    rows = []
    for e in doc.results:
        if e.skipped:
            rows.append([e.backend, "-", f"skipped: {e.skipped}"] + ["-"] * (1 + 2 * len(ops)))
            continue
        cells = [e.backend, durability_used(e.backend_stats), num(e.throughput_ops_sec),
                 times(e.throughput_ops_sec / base if base else None)]
        for n in ops:
            s = e.ran().get(n) or OpStats()
            cells += [num(s.p50_us), num(s.p99_us)]
        rows.append(cells)
    first = ran[0].backend if ran else "first"
    head = ["backend", "durability", "ops/s", f"x {first}"]
    for n in ops:
        head += [f"{n} p50 µs", f"{n} p99 µs"]
    return md_table(head, rows)


def durability_used(stats: dict[str, Any] | None) -> str:
    """The durability a run really used, as its store reported it: the mode, and for a server
    whose own setting decides it (Redis' ``appendfsync``) that setting too."""
    if not stats:
        return "-"
    mode = str(stats.get("durability", "-"))
    fsync = stats.get("server_appendfsync")
    return f"{mode} (appendfsync {fsync})" if fsync else mode


def backends_headline(runs: Runs) -> str:
    (doc,) = _as(Compare, runs)
    return "write-heavy ops/s: " + ", ".join(
        f"{e.backend} {'skipped' if e.skipped else num(e.throughput_ops_sec)}"
        for e in doc.results)


# -------------------------------------------------------------------------------------- peers
def peer_redis(runs: Runs) -> list[str]:
    """The backend's puts against redis-benchmark (step ``run``), then ``bench run``'s YCSB
    workload against a client doing what YCSB's Redis binding does (step ``ycsb-binding``)."""
    doc = Peer.from_json(runs["run"])
    lines = md_table(["clients", "pipeline", "placement", "redis-benchmark SET/s (each run)",
                      "ckptbench puts/s (each round)", "ratio (median round)"],
                     [[str(doc.clients), str(doc.pipeline), doc.placement,
                       " ".join(num(v) for v in doc.peer_throughput),
                       " ".join(num(v) for v in doc.ours_throughput), times(doc.ratio)]])
    b = BindingPeer.from_json(runs["ycsb-binding"])
    lines += ["", f"`bench run {b.workload}` ({num(b.records)} records of {b.field_count} fields "
              f"x {b.field_length} bytes, {num(b.ops)} operations, {b.distribution}) against "
              f"{b.against}; {b.warmup} warm-up pair(s) first; {b.placement}:", ""]
    rows = [[str(e.threads), " ".join(num(v) for v in e.binding_throughput),
             " ".join(num(v) for v in e.ours_throughput), times(e.ratio),
             target(e.ratio >= OVER_BINDING, f"≥ {OVER_BINDING:.1f}x the binding")]
            for e in b.by_threads]
    return lines + md_table(["threads", "binding-like ops/s (each run)",
                             "bench run ops/s (each round)", "ratio (median round)", "target"],
                            rows)


def peer_redis_headline(runs: Runs) -> str:
    doc = Peer.from_json(runs["run"])
    b = BindingPeer.from_json(runs["ycsb-binding"])
    binding = ", ".join(f"{times(e.ratio)} at {e.threads} thread{'s' * (e.threads != 1)}"
                        for e in b.by_threads)
    return (f"the redis backend at {times(doc.ratio)} redis-benchmark's SET rate "
            f"({doc.clients} clients, pipeline {doc.pipeline}); bench run {b.workload} at "
            f"{binding} of YCSB's Redis binding")




# ----------------------------------------------------------------------------- embedded-peers
def _leads(doc: Compare) -> dict[str, float]:
    """indexed_fs's throughput over each other backend's: the median of the per-round ratios
    where the compare ran rounds with indexed_fs first, else the ratio of the two runs."""
    ran = {e.backend: e.throughput_ops_sec for e in doc.results if not e.skipped}
    ours = ran.get("indexed_fs")
    leads = {b: ours / t for b, t in ran.items() if ours and b != "indexed_fs" and t}
    if doc.results and doc.results[0].backend == "indexed_fs":  # the ratios' first
        leads.update({r.over: r.median for r in doc.ratios or []})
    return leads


def _compare_rows(doc: Compare, what: str) -> list[list[str]]:
    """One row per backend of a ``bench compare``: throughput (the median run's, with
    ``--rounds``), the busiest operation's p50 and p99, and indexed_fs's throughput over this
    backend's (the median of the rounds' ratios), with the target it is held to."""
    ran = {e.backend: e for e in doc.results if not e.skipped}
    ours = ran.get("indexed_fs")
    peers = {b: e.throughput_ops_sec for b, e in ran.items() if b != "indexed_fs"}
    leads = _leads(doc)
    records = doc.config["workload_spec"]["records"]
    rows = []
    for e in doc.results:
        if e.skipped:
            rows.append([what, e.backend, f"skipped: {e.skipped}", "-", "-", "-", ""])
            continue
        op = e.phases["run"].busiest()
        lead = leads.get(e.backend) if ours and e is not ours else None
        goal = ""
        if doc.workload == "write-heavy" and e is ours and peers and doc.config["threads"] == 16:
            best = max(peers, key=peers.get)
            goal = target(leads.get(best, 0) >= PEER_WRITE_LEAD,
                          f"≥ {PEER_WRITE_LEAD:g}x the best peer ({best})")
        elif doc.workload == "ycsb-c" and e.backend in GETS_OVER and lead is not None:
            need = GETS_OVER[e.backend]
            goal = (target(lead >= need, f"indexed_fs ≥ {need:.1f}x") if records == GETS_KEYS
                    else f"set for {num(GETS_KEYS)} keys")
        rows.append([what, e.backend, num(e.throughput_ops_sec), num(op.p50_us),
                     num(op.p99_us), times(lead), goal])
    return rows


def _compares(runs: Runs) -> list[Compare]:
    return [d for d in map(read_run, runs.values()) if isinstance(d, Compare)]


def _reopens(runs: Runs) -> dict[tuple[str, bool], Result]:
    """The ``bench recovery`` documents by (backend, after SIGKILL)."""
    docs = [d for d in map(read_run, runs.values()) if isinstance(d, Result)]
    return {(d.backend, d.recovery.crash): d for d in docs if d.recovery is not None}


def embedded_peers(runs: Runs) -> list[str]:
    rows = []
    for doc in _compares(runs):
        threads = doc.config["threads"]
        what = ("durable puts" if doc.workload == "write-heavy" else f"{doc.workload} gets")
        rows += _compare_rows(doc, f"{what}, {threads} thread{'s' * (threads > 1)}, "
                                   f"{num(doc.config['workload_spec']['records'])} keys")
    table = md_table(["measure", "backend", "ops/s", "p50 µs", "p99 µs", "indexed_fs ÷ this",
                      "target"], rows)
    reopen = _reopens(runs)
    peers = sorted({b for b, _ in reopen if b != "indexed_fs"})
    rows = []
    for crash in (False, True):
        ours = reopen.get(("indexed_fs", crash))
        if ours is None:
            continue
        keys, ms = ours.config["records"], _reopen(ours).open_ms
        cells = ["SIGKILL" if crash else "clean close", num(keys), num(ms)]
        for peer in peers:
            other = reopen.get((peer, crash))
            cells += [num(_reopen(other).open_ms) if other else "-",
                      times(ms / _reopen(other).open_ms) if other else "-"]
        lost = sum(_reopen(d).missing + _reopen(d).corrupt
                   for (_, c), d in reopen.items() if c == crash)
        cells.append("every key" if lost == 0 else f"{num(lost)} missing or corrupt")
        clean = reopen.get(("indexed_fs", False))
        if keys != REOPEN_KEYS:
            goal = f"set for {num(REOPEN_KEYS)} keys"
        elif not crash and ("rocksdb", False) in reopen:
            goal = target(ms <= _reopen(reopen[("rocksdb", False)]).open_ms,
                          "≤ rocksdb's reopen")
        elif crash and clean:
            bound = min(PEER_CRASH_MS, PEER_CRASH_OVER_CLEAN * _reopen(clean).open_ms)
            goal = target(ms <= bound, f"≤ {num(PEER_CRASH_MS)} ms and ≤ "
                                       f"{PEER_CRASH_OVER_CLEAN:g}x the clean reopen")
        else:
            goal = ""
        rows.append(cells + [goal])
    head = ["reopen after", "keys", "indexed_fs ms"]
    for peer in peers:
        head += [f"{peer} ms", f"indexed_fs ÷ {peer}"]
    return table + [""] + md_table(head + ["read back and verified", "target"], rows)


def embedded_peers_headline(runs: Runs) -> str:
    """indexed_fs against the best peer of each comparison, and the clean reopen times."""
    parts = []
    for doc in _compares(runs):
        ran = {e.backend: e.throughput_ops_sec for e in doc.results if not e.skipped}
        ours = ran.pop("indexed_fs", None)
        if ours and ran:
            best = max(ran, key=ran.get)
            threads = doc.config["threads"]
            kind = "durable puts" if doc.workload == "write-heavy" else "gets"
            parts.append(f"{kind} x{threads} {times(_leads(doc).get(best, ours / ran[best]))} "
                         f"({best})")
    reopen = _reopens(runs)
    clean = {b: d for (b, crash), d in reopen.items() if not crash}
    if clean:
        keys = num(next(iter(clean.values())).config["records"])
        parts.append(f"clean reopen of {keys} keys: "
                     + ", ".join(f"{b} {num(_reopen(d).open_ms)} ms" for b, d in clean.items()))
    return "indexed_fs ÷ the best peer: " + "; ".join(parts)
