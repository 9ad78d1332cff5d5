"""``bench reproduce``: the named experiments behind ``docs/results.md``, each defined by its commands.

An experiment is the exact ``bench`` command lines it runs (full and ``--quick`` sizes), the
servers it needs, and a function turning the JSON those commands wrote into a markdown table
(:mod:`experiments.reproduce.tables` for the store experiments; a paper's experiment keeps its
table beside its result type).  Every command runs as a subprocess of the installed CLI
with its output options pointing into the results directory, so the command line printed in
the docs is character for character the one that produced the figures; nothing is typed in by
hand.  How a finished experiment becomes docs is :mod:`experiments.reproduce.docs`.

Output layout for experiment ``NAME`` under ``out`` (``results`` by default):
``out/NAME.json`` (``ckptbench.reproduce/1``: every command, its document, timing, machine and
load), ``out/NAME/LABEL.json`` and ``.log`` (one command's own document and output),
``out/NAME*.png`` (its charts), and ``out/thesis/`` (the thesis commands' own directory:
``table5.2`` reads its siblings there).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from experiments.audit import runner as audit
from experiments.core.bench_command import run_bench
from experiments.core.document import cpu_model
from experiments.core.format import collect_targets
from experiments.core.results import ensure_parent, write_json
from experiments.reproduce import docs as reproduce_docs
from experiments.reproduce import cost, papers, state, tables
from experiments.reproduce.result import Reproduce, StepRun, Target
from experiments.spark import matrix_result, scaling_result, state_sweep_result
from experiments.storage import compare_table, thesis_result, throttle_curve

SCHEMA = Reproduce.SCHEMA
#: seconds one command may take before it is stopped and its experiment marked failed
QUICK_TIMEOUT = 20 * 60
FULL_TIMEOUT = 4 * 60 * 60


@dataclass(frozen=True)
class Step:
    """One ``bench`` command of an experiment.  ``full``/``quick`` are its arguments at the two
    sizes; ``outputs`` the output options appended to both; in all of them ``{document}``/``{plot}``/
    ``{out}`` are filled from the templates below (``{out}`` the results directory, ``{name}``
    the experiment, ``{label}`` this step, ``{pages}`` the directory of the docs being written,
    where a paper's experiment keeps its own page)."""

    label: str
    full: str
    quick: str
    outputs: tuple[str, ...] = ("--json", "{document}")
    document: str = "{out}/{name}/{label}.json"
    plot: str = ""  # the PNG the command writes ("" = none)
    shown_as: str = ""  # where the PNG is published as out/NAME*.png, if not where it is written

    def paths(self, out: str, name: str) -> dict[str, str]:
        fill = {"out": out, "name": name, "label": self.label}
        doc, plot = self.document.format(**fill), self.plot.format(**fill)
        return {"document": doc, "plot": plot,
                "shown_as": self.shown_as.format(**fill) if self.shown_as else plot}

    def argv(self, out: str, name: str, quick: bool, pages: str = "docs") -> list[str]:
        """The arguments after ``bench``, output options included."""
        fill = {"out": out, "name": name, "pages": pages, **self.paths(out, name)}
        return [token.format(**fill) for token in shlex.split(self.quick if quick else self.full)] + [
            token.format(**fill) for token in self.outputs]


@dataclass(frozen=True)
class Experiment:
    """A named experiment: what it shows, its steps in order, the servers that must be running
    (otherwise it is skipped), and how its commands' documents (by step label) become the
    docs' table and the README's one-line headline."""

    name: str
    shows: str
    steps: tuple[Step, ...]
    table: Callable[[dict[str, dict[str, Any]]], list[str]]
    headline: Callable[[dict[str, dict[str, Any]]], str]
    servers: tuple[str, ...] = ()
    #: draws the experiment's chart from all its documents into a path (when no single command
    #: draws it): ``out/NAME.png``
    chart: Callable[[dict[str, dict[str, Any]], str], None] | None = None
    #: steps are rows of one table, each its own run: a failed step becomes its row's error
    #: (``{"error": ...}`` among the documents) and the others still run and are published
    rows_apart: bool = False


def command(argv: list[str]) -> str:
    """How a command is printed (and can be pasted back into a shell)."""
    return "bench " + shlex.join(argv)


def _plotted(label: str, full: str, quick: str, plot: str, flag: str = "--plot") -> Step:
    return Step(label, full, quick, ("--json", "{document}", flag, "{plot}"), plot=plot)


def _state_sweep_chart(runs: dict[str, dict[str, Any]], path: str) -> None:
    """The stores' sweep and Spark's own state store's line on the same axes."""
    from experiments.report.plots import plot_state_sweep

    plot_state_sweep(state_sweep_result.of_runs(runs), path)


def _throttle_curve(runs: dict[str, dict[str, Any]]) -> throttle_curve.ThrottleCurve:
    return throttle_curve.ThrottleCurve.from_json(runs["run"])


def _of_runs(name: str, shows: str, module: Any) -> Experiment:
    """An experiment of ``bench spark`` runs, each a row of its own, defined by ``module``: its
    ``commands(size)`` (the same labels at both sizes), ``table``, ``headline``, ``chart`` and
    ``SERVERS``."""
    steps = tuple(Step(lab, full, quick) for (lab, full), (_, quick)
                  in zip(module.commands("full"), module.commands("quick")))
    return Experiment(name, shows, steps, module.table, module.headline, servers=module.SERVERS,
                      chart=module.chart, rows_apart=True)


def _thesis(name: str, plot: bool = True) -> Step:
    return Step(name, f"thesis {name}", f"thesis {name} --quick", ("--out", "{out}/thesis"),
                document="{out}/thesis/{name}.json",
                plot="{out}/thesis/{name}.png" if plot else "",
                shown_as="{out}/{name}.png" if plot else "")


def _reopen(backend: str, records: int, crash: bool, reopens: int = 1) -> str:
    return (f"recovery --backend {backend} --records {records} --value-size 40 --durability none"
            + (" --crash" if crash else "") + (f" --reopens {reopens}" if reopens > 1 else ""))


def _peer_writes(threads: int, quick_ops: int) -> Step:
    full = f"compare write-heavy --backends {_PEERS} --read-proportion 0 --threads {threads}"
    return _plotted(f"write-{threads}", f"{full} --rounds 3", f"{full} --ops {quick_ops}",
                    "{out}/{name}-{label}.png")


def _writes(backend: str, size: str) -> str:
    return f"write-heavy --backend {backend} --read-proportion 0 {size} --baseline"


def _audit(label: str, args: str, full: int, quick: int) -> Step:
    cmd = f"audit {args} --allow-loss --rounds"
    return Step(label, f"{cmd} {full}", f"{cmd} {quick}")


def _paper_module(name: str) -> Any:
    """``experiments.spark.<name>`` (checkmate, stragglers), imported when a table is made: importing it
    loads the Spark job's modules, which listing or parsing experiments must not pay for."""
    import importlib

    return importlib.import_module(f"experiments.spark.{name}")


#: the instances of ``checkmate-parallelism`` (``checkmate``'s are the machine's 2 cores)
CHECKMATE_INSTANCES = 4


def _checkmate(name: str, shows: str, args: str, full_only: str = "") -> Experiment:
    """One part of CheckMate's experiment, a ``bench checkmate`` run of its own (each fits a
    quiet window of about 2 hours; the run prints its expected duration first); ``full_only``:
    arguments of the full run only (the skew part's MSTs come from ``checkmate``'s run)."""
    return Experiment(
        name, shows, (
            Step("run", f"checkmate{args}{full_only}", f"checkmate --quick{args}",
                 ("--docs", "{pages}/checkmate.md", "--json", "{document}", "--png", "{plot}"),
                 # beside its document: the first part's charts are out/checkmate*.png, which a
                 # chart of another part must not match (docs.charts_of)
                 plot="{out}/checkmate.png" if name == "checkmate" else f"{{out}}/{name}/{name}.png"),),
        lambda docs: _paper_module("checkmate").markdown(docs["run"]),
        lambda docs: _paper_module("checkmate").headline(docs["run"]))


_SWEEP = ("sweep write-heavy --backends indexed_fs,default_fs --read-proportion 0 "
          "--threads-sweep 1,16 --rounds")
_PEERS = "indexed_fs,rocksdb,lmdb,sqlite"
_BINDING = ("peer redis --against ycsb-binding --workload workloada --records 10000 "
            "--threads 1,8 --rounds 3")
_MATRIX = "spark-matrix --protocols none,coordinated,uncoordinated,logio,cic --backends indexed_fs,redis"
#: the protocols the matrix holds to targets, with the state issue's state: 2,000,000 keys of 1 KiB
#: (2 GiB), about 1 % of them dirty an interval after a load phase, incremental per-key checkpoints.
#: No spark-state: its pandas state processor ran sized state at under 10,000 events/s (a
#: quick run), hours at this size; state-sweep compares it
_MATRIX_STATE = ("spark-matrix --protocols none,coordinated,uncoordinated,logio --backends indexed_fs "
                 "--state-bytes 1024 --layout per-key --skew load+hot:1:20000 --no-spark-state --warmup 0")
#: the matrix on the cluster's hosts at 2, 4 and 6 instances, host 1 lost in every run that takes
#: failures (indexed_fs on the cluster's HDFS, the servers at its relays)
_SCALING = "spark-matrix --cluster --parallelism 2,4,6 --fail-node 1"
#: the run's sizes: full (one warm-up round, so the first parallelism does not pay the JVM's
#: compilation), quick
_SCALING_SIZES = ("--events 400000 --keys 10000 --batch 50000 --rounds 1 --warmup 1",
                  "--events 100000 --keys 2000 --batch 25000 --rounds 1 --warmup 0")

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment(
        "store-write", "durable write (fdatasync per put) on indexed_fs with 1 and 16 threads and on "
        "default_fs with 16, each beside the bare fdatasync loop in Python and in C", (
            Step("indexed_fs-1", _writes("indexed_fs", "--ops 5000"), _writes("indexed_fs", "--ops 2000")),
            Step("indexed_fs-16", _writes("indexed_fs", "--threads 16 --ops 16000"),
                 _writes("indexed_fs", "--threads 16 --ops 6400")),
            Step("default_fs-16", _writes("default_fs", "--threads 16 --ops 8000"),
                 _writes("default_fs", "--threads 16 --ops 3200"))),
        tables.store_write, tables.store_write_headline),
    Experiment(
        "store-scaling", "16 threads over 1 (group commit) and indexed_fs over default_fs, as the "
        "median of interleaved rounds, with the process unpinned and on the disk's interrupt CPUs", (
            _plotted("unpinned", f"{_SWEEP} 5", f"{_SWEEP} 3 --point-seconds 1",
                     "{out}/store-scaling.png"),
            _plotted("irq", f"{_SWEEP} 5 --cpus irq", f"{_SWEEP} 3 --point-seconds 1 --cpus irq",
                     "{out}/store-scaling-irq.png")),
        tables.store_scaling, tables.store_scaling_headline),
    Experiment(
        "store-reopen", "indexed_fs reopen time after a clean close (index snapshot) and after "
        "SIGKILL (the last snapshot, hint files of sealed segments, a walk of the active one), every key "
        "read back and verified", (
            Step("clean", _reopen("indexed_fs", 1_000_000, False, 5),
                 _reopen("indexed_fs", 200_000, False)),
            Step("crash", _reopen("indexed_fs", 1_000_000, True, 5),
                 _reopen("indexed_fs", 200_000, True))),
        tables.store_reopen, tables.store_reopen_headline),
    Experiment(
        "harness", "the harness' own ceiling: write-only on the memory backend, in 1 and 2 "
        "processes", (
            Step("1-process", "write-heavy --backend memory --read-proportion 0 --ops 300000",
                 "write-heavy --backend memory --read-proportion 0 --ops 100000"),
            Step("2-processes", "write-heavy --backend memory --read-proportion 0 --processes 2 "
                 "--ops 600000", "write-heavy --backend memory --read-proportion 0 --processes 2 "
                 "--ops 200000")),
        tables.harness, tables.harness_headline),
    Experiment(
        "checkpoint-drops", "S4's SafeKeeper at a fixed event rate: the checkpoints the storage "
        "queue drops when the backend cannot keep up, default_fs against indexed_fs", (
            Step("default_fs", "checkpoint --backend default_fs --rate 1200",
                 "checkpoint --backend default_fs --rate 1200 --events 4000"),
            Step("indexed_fs", "checkpoint --backend indexed_fs --rate 1200",
                 "checkpoint --backend indexed_fs --rate 1200 --events 4000")),
        tables.checkpoint_drops, tables.checkpoint_drops_headline),
    Experiment(
        "backends", "write-heavy on the server backends beside indexed_fs, identical settings", (
            _plotted("compare", "compare write-heavy --backends indexed_fs,redis,hbase,minio --ops 1000",
                     "compare write-heavy --backends indexed_fs,redis,hbase,minio --ops 300",
                     "{out}/backends.png"),),
        tables.backends, tables.backends_headline, servers=("redis", "hbase", "minio")),
    Experiment(
        "embedded-peers", "indexed_fs beside the embedded stores a team would otherwise pick "
        "(RocksDB, LMDB, SQLite in WAL mode): durable puts with 16 and 1 threads, random gets, "
        "reopen after a clean close and after SIGKILL", (
            _peer_writes(16, 800),
            _peer_writes(1, 300),
            _plotted("gets",
                     # 10^6 gets a round: a round of 10^5 lasts under half a second, and rounds
                     # that short moved the ratio to LMDB by a third from one to the next
                     "compare ycsb-c --backends indexed_fs,rocksdb,lmdb --records 100000 --ops 1000000 "
                     "--rounds 5",
                     "compare ycsb-c --backends indexed_fs,rocksdb,lmdb --records 20000 --ops 5000",
                     "{out}/{name}-{label}.png"),
            *(Step(f"{backend}-{'crash' if crash else 'clean'}",
                   _reopen(backend, 1_000_000, crash, 5), _reopen(backend, 200_000, crash))
              for backend in ("indexed_fs", "rocksdb") for crash in (False, True))),
        tables.embedded_peers, tables.embedded_peers_headline),
    Experiment("fig4.1", "thesis Fig 4.1: write-heavy latency against throughput, file backends, "
               "threads raised until throughput stops growing", (_thesis("fig4.1"),),
               thesis_result.fig41, thesis_result.fig41_headline),
    Experiment("fig4.2", "thesis Fig 4.2: indexed_fs index rebuild time against the number of PEs",
               (_thesis("fig4.2"),), thesis_result.fig42, thesis_result.fig42_headline),
    Experiment("fig4.5", "thesis Figs 4.5/4.6: S4 word count's checkpoint writes and lazy recovery "
               "reads per backend (server backends that are down are listed as skipped)",
               (_thesis("fig4.5"),), thesis_result.fig45, thesis_result.fig45_headline),
    Experiment("fig4.7", "thesis Fig 4.7: storage-queue throughput against the number of PEs",
               (_thesis("fig4.7"),), thesis_result.fig47, thesis_result.fig47_headline),
    Experiment("table5.2", "thesis Table 5.2: the stores' trade-offs, with the figures of fig4.1, "
               "fig4.5 and fig4.7 (run those first)", (_thesis("table5.2", plot=False),),
               thesis_result.table52, thesis_result.table52_headline),
    Experiment(
        "storage-compare", "local disk, tmpfs, NFS and HDFS (when `bench services up hdfs` "
        "runs): Table 5.1's small writes, write-heavy on both file backends at 1, 4 and 16 "
        "threads (the thesis' Fig 4.1 shape per medium), reopen time, and round trips per "
        "operation", (
            _plotted("run", "storage-compare --threads 1,4,16",
                     "storage-compare --sizes 1e4 --sync-ops 500 --ops 2000 --seconds 5 "
                     "--recovery-keys 20000 --rpc-ops 50 --threads 1,4,16",
                     "{out}/storage-compare.png"),),
        compare_table.storage_compare, compare_table.storage_compare_headline, servers=("nfs",)),
    Experiment(
        "audit", "durability audit: acknowledged writes lost or wrong after power cuts (lossy "
        "FUSE file system) and SIGKILLs, per backend and durability mode", (
            _audit("indexed_fs-sync", "power-loss --backend indexed_fs", 20, 4),
            _audit("indexed_fs-interval", "power-loss --backend indexed_fs --durability "
                   "interval", 10, 3),
            _audit("indexed_fs-none", "power-loss --backend indexed_fs --durability none", 10, 3),
            _audit("indexed_fs-sigkill", "sigkill --backend indexed_fs", 20, 4),
            _audit("default_fs-sync", "power-loss --backend default_fs", 20, 4),
            _audit("default_fs-none", "power-loss --backend default_fs --durability none", 10, 3),
            _audit("redis-always", "power-loss --backend redis --durability always", 20, 3),
            _audit("redis-everysec", "power-loss --backend redis --durability everysec", 10, 3),
            _audit("minio-sync", "power-loss --backend minio", 20, 3),
            _audit("minio-server", "power-loss --backend minio --durability server --fs-model "
                   "journal", 10, 2),
            _audit("hbase-wal", "power-loss --backend hbase --durability wal", 3, 1),
            _audit("hbase-wal_hsync-hdfs", "power-loss --backend hbase --durability wal_hsync "
                   "--hbase-root hdfs", 3, 1),
            _audit("hbase-wal_hsync-hdfs-checksum-fsync", "power-loss --backend hbase "
                   "--durability wal_hsync --hbase-root hdfs --cut-after-sync '*/rbw/*.meta'",
                   2, 1),
            _audit("rocksdb-sync", "power-loss --backend rocksdb", 20, 3),
            _audit("lmdb-sync", "power-loss --backend lmdb", 20, 3),
            _audit("sqlite-sync", "power-loss --backend sqlite", 20, 3),
            _audit("sqlite-normal", "power-loss --backend sqlite --durability normal", 10, 2),
        ), audit.table, audit.headline),
    Experiment(
        "peer-redis", "the redis backend's client beside redis-benchmark on the same server, "
        "connections and pipeline depth; bench run's YCSB workload A beside a client doing what "
        "YCSB's Redis binding does, at 1 and 8 threads", (
            Step("run", "peer redis --clients 16 --pipeline 1 --rounds 3",
                 "peer redis --clients 16 --pipeline 1 --rounds 3 --ops 5000"),
            Step("ycsb-binding", f"{_BINDING} --ops 100000", f"{_BINDING} --ops 20000")),
        tables.peer_redis, tables.peer_redis_headline, servers=("redis",)),
    Experiment(
        "spark-matrix", "checkpoint protocols x backends on PySpark after 2 warm-up rounds, as the "
        "median of 3 interleaved rounds: throughput, checkpoint and recovery time, the work done, "
        "exactly-once verified; then none, coordinated, uncoordinated and logio on indexed_fs with "
        "2 GiB of state, 1 % of it dirty an interval", (
            _plotted("run", f"{_MATRIX} --events 16000000 --keys 10000 --rounds 3",
                     f"{_MATRIX} --events 200000 --keys 2000 --batch 50000 --rounds 3",
                     "{out}/spark-matrix.png", flag="--png"),
            _plotted("state", f"{_MATRIX_STATE} --keys 2000000 --events 20000000 --batch 500000 --interval 4 "
                              "--rounds 2",
                     f"{_MATRIX_STATE} --keys 20000 --events 400000 --batch 50000 --interval 2 --rounds 1",
                     "{out}/spark-matrix-state.png", flag="--png")),
        matrix_result.spark_matrix, matrix_result.spark_matrix_headline, servers=("redis",)),
    Experiment(
        "cluster-scaling", "the matrix on the 3 hosts of `bench services up cluster` at 2, 4 and 6 "
        "instances on one session, host 1 lost in every run that takes failures: none, coordinated and "
        "logio on redis and indexed_fs over the cluster's HDFS, then coordinated on hbase, minio and "
        "default_fs; throughput, checkpoint and recovery time, Spark's executor-loss detection, "
        "exactly-once verified; about 1 h 40 min (--quick about 30 min)", (
            Step("run", f"{_SCALING} --protocols none,coordinated,logio --backends redis,indexed_fs "
                        f"{_SCALING_SIZES[0]}",
                 f"{_SCALING} --protocols none,coordinated,logio --backends redis,indexed_fs "
                 f"{_SCALING_SIZES[1]}"),
            Step("stores", f"{_SCALING} --protocols coordinated --backends hbase,minio,default_fs "
                           f"{_SCALING_SIZES[0]}",
                 f"{_SCALING} --protocols coordinated --backends hbase,minio,default_fs {_SCALING_SIZES[1]}")),
        scaling_result.markdown, scaling_result.headline, servers=("cluster", "redis", "hbase", "minio")),
    _checkmate("checkmate", "CheckMate's grid at the paper's method: each protocol's MST per query (NexMark "
               "q1/q3/q8/q12 under none, coordinated, uncoordinated and cic, uniform input), every run paced at "
               "80 % of it with one failure, and the cyclic query (emulated); about 1 h 30 min", ""),
    _checkmate("checkmate-skew", "CheckMate's skew figure (Fig 12): q3/q8/q12 with 10/20/30 % hot items at 50 % "
               "and 80 % of each protocol's uniform MST, taken from `bench reproduce checkmate` (run it first), "
               "no failure: p50 latency and checkpoint time; about 1 h 40 min",
               " --part skew", " --mst-from {out}/checkmate/run.json"),
    _checkmate("checkmate-paired", "CheckMate's first headline (coordinated ≈ none, Fig 7) side by side: none and "
               "coordinated probed in turn at the ends of both protocols' MST brackets from `bench reproduce "
               "checkmate` (run it first), 3 rounds, a rate sustained when most rounds sustained it; about 40 min",
               " --part paired", " --mst-from {out}/checkmate/run.json"),
    _checkmate("checkmate-parallelism", "CheckMate's grid at the paper's method with 4 instances on the "
               "2-core machine (each instance a task slot, time-shared): MST per query and protocol, the paced "
               "grid with one failure; about 1 h 30 min", f" --parallelism {CHECKMATE_INSTANCES}"),
    Experiment(
        "logio-stragglers", "LOG.io's straggler experiment: one slow instance at a moderate rate, "
        "logio against coordinated in normal processing and after the straggler's failure", (
            Step("run", "logio-stragglers", "logio-stragglers --quick",
                 ("--docs", "{pages}/logio.md", "--json", "{document}", "--png", "{plot}"),
                 plot="{out}/logio-stragglers.png"),),
        lambda docs: _paper_module("stragglers").markdown(docs["run"]),
        lambda docs: _paper_module("stragglers").headline(docs["run"])),
    _of_runs(
        "state", "1 KiB of state a key (over 2 GiB in all) checkpointed by coordinated to every "
        "store, chunks on each and every layout on indexed_fs, one failure a run: checkpoint tail "
        "and rate against the disk's sequential rate for the same bytes, space amplification, "
        "recovery by phase from a cold cache, steady throughput over none, exactly-once", state),
    Experiment(
        "state-sweep", "how checkpoint p50/p99, recovery time, space amplification, bytes written "
        "and steady throughput grow with the live state (16 MiB to 4 GiB) and with the share of keys "
        "an interval dirties (0.1 % to 100 %), per store x layout and on Spark's own state store, "
        "one failure a run: each metric's log-log slope and where its curve bends", (
            # each step's own plot is one part of the sweep; the chart (both parts) is drawn over
            # the first part's: the published PNG is always the whole sweep
            # --resume: a sweep stopped part-way continues where it stopped (its tables say which
            # points an earlier sitting measured)
            Step("run", "state-sweep --resume", "state-sweep --quick --resume",
                 ("--json", "{document}", "--plot", "{out}/state-sweep.png")),
            Step("spark-state", "state-sweep --resume --stores spark-state",
                 "state-sweep --quick --resume --stores spark-state",
                 ("--json", "{document}", "--plot", "{out}/{name}/spark-state.png"))),
        state_sweep_result.table, state_sweep_result.headline, servers=("redis", "hbase", "minio"),
        chart=_state_sweep_chart),
    _of_runs(
        "cost", "what a checkpoint costs in requests and dollars: coordinated full checkpoints of 1 KiB "
        "a key to MinIO, Redis, HBase and indexed_fs (local disk and HDFS), chunks against per-key, "
        "and on MinIO at three key counts; one failure a run, its restore priced, and what the run "
        "left off its recovery line", cost),
    Experiment(
        "cost-throttle", "checkpoint writes on MinIO behind S3-like throttling (503 SlowDown above "
        "a request rate per prefix, botocore's standard retries): updates/s, latency, 503s, "
        "retries and their backoff against the allowed rate, on one prefix and with "
        "prefix_entropy=8", (
            _plotted("run", "throttle-curve", "throttle-curve --rates 50,200 --ops 300 --records 50",
                     "{out}/cost-throttle.png"),),
        lambda runs: throttle_curve.table(_throttle_curve(runs)),
        lambda runs: throttle_curve.headline(_throttle_curve(runs)), servers=("minio",)),
)}


def names() -> list[str]:
    return list(EXPERIMENTS)


# ------------------------------------------------------------------------------------- running
def server_running(server: str) -> bool:
    """Whether ``bench services`` reports ``server`` running (any failure to tell: not running)."""
    import services

    try:
        return bool(services.status([server])[0].get("running"))
    except Exception:  # noqa: BLE001 - an unknown or broken service is simply not running
        return False


def run_step(step: Step, exp: Experiment, out: str, quick: bool, timeout: float,
             pages: str = "docs") -> StepRun:
    """Run one command, its stdout and stderr into ``out/NAME/LABEL.log``; the run's record
    (``error`` is its last stderr line when it failed)."""
    argv = step.argv(out, exp.name, quick, pages)
    paths = step.paths(out, exp.name)
    log = os.path.join(out, exp.name, f"{step.label}.log")
    for path in (log, paths["document"], paths["plot"]):
        if path:
            ensure_parent(path)
    if os.path.exists(paths["document"]):
        os.remove(paths["document"])  # a document left by an earlier run must not pass for this one
    ran = run_bench(argv, log, timeout)
    record = StepRun(step.label, command(argv), ran.returncode, ran.seconds, log, paths["document"],
                     paths["shown_as"] or None)
    if ran.error:
        record.error = ran.error
    elif not os.path.exists(paths["document"]):
        record.error = f"it wrote no {paths['document']}"
    else:
        with open(paths["document"], encoding="utf-8") as f:
            record.document = json.load(f)
        if paths["plot"] and paths["shown_as"] != paths["plot"] and os.path.exists(paths["plot"]):
            shutil.copyfile(paths["plot"], paths["shown_as"])
    return record


class RerunError(ValueError):
    """``--rerun`` cannot take the other steps over from the earlier run (one line, the fix)."""


def reusable(exp: Experiment, out: str, quick: bool, rerun: list[str], pages: str = "docs") -> tuple[dict[str, StepRun], str]:
    """The steps of ``exp`` that ``--rerun`` takes over from ``out/NAME.json`` (every step not
    named in ``rerun``), and when that run started; a clear error when a step is unknown, or
    the earlier run is missing, of the other size, or ran a step with another command line or
    without success — so a table is never made of steps that did not run as its commands say."""
    labels = [s.label for s in exp.steps]
    unknown = [label for label in rerun if label not in labels]
    if unknown:
        raise RerunError(f"--rerun {unknown[0]!r}: {exp.name} has no such step; its steps: {', '.join(labels)}")
    path = os.path.join(out, f"{exp.name}.json")
    try:
        with open(path, encoding="utf-8") as f:
            earlier = json.load(f)
    except (OSError, ValueError) as exc:
        raise RerunError(f"--rerun needs the earlier run's {path} ({exc.__class__.__name__}); run "
                         f"`bench reproduce {exp.name}` in full first") from None
    if bool(earlier.get("quick")) != quick:
        raise RerunError(f"{path} is a {'--quick' if earlier.get('quick') else 'full'} run; rerun at "
                         f"the same size, or run `bench reproduce {exp.name}` in full")
    runs = {r["label"]: StepRun(**r) for r in earlier.get("runs", [])}
    taken = {}
    for step in exp.steps:
        if step.label in rerun:
            continue
        before, now = runs.get(step.label), command(step.argv(out, exp.name, quick, pages))
        if before is None or before.error or before.document is None:
            raise RerunError(f"step {step.label!r} did not succeed in {path}; add it to --rerun")
        if before.command != now:
            raise RerunError(f"step {step.label!r} ran `{before.command}` in {path}, not `{now}`; "
                             f"add it to --rerun")
        taken[step.label] = before
    return taken, str(earlier.get("started", ""))


def run_experiment(exp: Experiment, out: str, quick: bool, say: Callable[[str], None],
                   pages: str = "docs", reuse: tuple[dict[str, StepRun], str] | None = None) -> Reproduce:
    """Every step in order (the first failure ends the experiment, unless its steps are rows
    apart: ``Experiment.rows_apart``); the reproduce document.  ``pages``: where a paper's
    experiment writes its own page (beside the docs being written).  ``reuse``: steps taken
    over from an earlier run instead of run (:func:`reusable`), and when that run started."""
    load_before, started, t0 = os.getloadavg(), time.strftime("%Y-%m-%dT%H:%M:%S%z"), time.monotonic()
    taken, taken_from = reuse if reuse is not None else ({}, "")
    runs = []
    for i, step in enumerate(exp.steps, 1):
        if step.label in taken:
            runs.append(taken[step.label])
            continue
        record = run_step(step, exp, out, quick, QUICK_TIMEOUT if quick else FULL_TIMEOUT, pages)
        runs.append(record)
        state = "failed" if record.error else "ok"
        say(f"reproduce: {exp.name} [{i}/{len(exp.steps)}] {state} in {record.seconds:.1f} s: "
            f"{record.command}" + (f": {record.error}" if record.error else ""))
        if record.error and not exp.rows_apart:
            break
    failures = [f"{r.command}: {r.error}" for r in runs if r.error]
    error = failures[0] if failures and not (exp.rows_apart and len(failures) < len(runs)) else None
    doc = Reproduce(
        name=exp.name, shows=exp.shows, quick=quick, servers=list(exp.servers),
        status="failed" if error else "ok", error=error,
        commands=[command(s.argv(out, exp.name, quick, pages)) for s in exp.steps],
        started=started, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        seconds=round(time.monotonic() - t0, 3), machine=machine(), cpus=os.cpu_count(),
        loadavg_before=list(load_before), loadavg_after=list(os.getloadavg()), runs=runs,
        reused=list(taken) or None, reused_from=taken_from or None)
    if not error:
        documents = doc.documents()
        if exp.rows_apart:
            documents.update({r.label: {"error": r.error} for r in runs if r.error})
        try:
            with collect_targets() as judged:
                doc.table = exp.table(documents)
            doc.targets = [Target(what, met) for what, met in judged] or None
            if exp.chart is not None:
                doc.chart = os.path.join(out, f"{exp.name}.png")
                exp.chart(doc.documents(), doc.chart)
            doc.run_sha256 = reproduce_docs.digest_json(doc.documents())
            doc.charts = reproduce_docs.charts_of(doc, os.path.join(out, f"{exp.name}.json"))
            if failures:  # published, and still a failure of the run
                doc.error = f"{len(failures)} of {len(runs)} steps failed: " + "; ".join(failures)
        except Exception as exc:  # noqa: BLE001 - a document the table cannot read is a failure
            doc.status, doc.error = "failed", f"could not tabulate: {type(exc).__name__}: {exc}"
    return doc


def machine() -> str:
    """The CPU model and kernel: what a reader needs to compare figures across machines."""
    return f"{cpu_model()}, {platform.system()} {platform.release()}"


def run(selected: list[str], *, quick: bool = False, out: str = "results",
        docs: str = "docs/results.md", readme: str = "README.md",
        say: Callable[[str], None] | None = None, registry: dict[str, Experiment] | None = None,
        allow_missed: bool = False, rerun: list[str] | None = None) -> int:
    """Run the ``selected`` experiments in order, write ``out/NAME.json`` and its report page
    ``out/NAME.html`` for each that ran, regenerate their blocks in ``docs`` and the summary
    in ``readme``.  Exit status: 0, or 1 when any experiment failed (the others still ran) or,
    unless ``allow_missed``, when a target of one was not met; a skipped one is not a
    failure.  ``rerun``: run only these steps of the one selected experiment and take the
    others over from its earlier ``out/NAME.json`` (:func:`reusable`; the docs' note says so)."""
    from experiments.report import page

    registry = EXPERIMENTS if registry is None else registry
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    failed, missed, status = [], [], {}
    for name in selected:
        exp = registry[name]
        for server in exp.servers:
            if server not in status:
                status[server] = server_running(server)
        down = [s for s in exp.servers if not status[s]]
        if down:
            say(f"reproduce: {name} skipped: {', '.join(down)} {'is' if len(down) == 1 else 'are'} "
                f"not running (start {'it' if len(down) == 1 else 'them'} with: "
                f"bench services up {' '.join(down)})")
            continue
        reuse = reusable(exp, out, quick, rerun, os.path.dirname(docs) or ".") if rerun else None
        doc = run_experiment(exp, out, quick, say, os.path.dirname(docs) or ".", reuse)
        path = os.path.join(out, f"{name}.json")
        write_json(path, doc)
        page.write_beside(path, doc, doc.commands)
        if doc.missed():
            missed.append(name)
            say(f"reproduce: {name}: target(s) NOT met: {'; '.join(doc.missed())}")
        if doc.status != "ok":
            failed.append(name)
            say(f"reproduce: {name} failed ({doc.error}); wrote {path}, {docs} left as it is")
            continue
        if doc.error:  # rows apart: the table says which failed
            failed.append(name)
            say(f"reproduce: {name}: {doc.error}")
        reproduce_docs.publish(exp, doc, docs, say, readme)
    reproduce_docs.update_summary(registry, out, docs, readme, say)
    if any(name in selected for name in papers.SOURCES.values()):
        papers.update(out, docs, say)
    if failed:
        say(f"reproduce: failed: {', '.join(failed)}")
    if missed:
        say(f"reproduce: target(s) not met in {', '.join(missed)}"
            + (" (--allow-missed: not a failure)" if allow_missed else
               "; exit status 1 (give --allow-missed to publish a run that misses them)"))
    return 1 if failed or (missed and not allow_missed) else 0
