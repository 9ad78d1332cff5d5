"""Markdown of the named experiments of ``bench reproduce``: one table and one headline each.

Every function here reads only the JSON documents the experiment's ``bench`` commands wrote
(keyed by the step label of :mod:`experiments.reproduce`), so ``docs/results.md`` and the README
summary can be rebuilt from ``results/*.json`` at any time, and a figure in the docs is always
one a command really printed into its document.  A document missing a field raises: the caller
reports the experiment as failed rather than publishing a half-empty table.
"""

from __future__ import annotations

import statistics
from typing import Any

from experiments.results import run_operations, sweep_ratios

Runs = dict[str, dict[str, Any]]


# --------------------------------------------------------------------------------- formatting
def num(value: float | None) -> str:
    """A measured value at a precision its noise allows: no decimals from 100 up (nor for
    counts, which are integers)."""
    if value is None:
        return "-"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A GitHub markdown table; ``|`` inside a cell is escaped."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(head), "|" + "|".join("---" for _ in head) + "|"] + [line(r) for r in rows]


def target(ok: bool, what: str) -> str:
    """A target cell: the target and whether this run met it."""
    return f"{what}: {'met' if ok else 'NOT met'}"


# The project's targets (docs/results.md, "Targets"): goals stated in advance, not measurements.
PUT_OVER_PYTHON_LOOP = 0.9  # 1-thread durable puts over the bare fdatasync loop in Python
GROUP_COMMIT_SCALING = 5.0  # indexed_fs, 16 threads over 1
INDEXED_OVER_DEFAULT = 10.0  # indexed_fs over default_fs at 16 threads
REOPEN_KEYS, REOPEN_CLEAN_MS, REOPEN_CRASH_MS = 1_000_000, 250.0, 3000.0
HARNESS_OPS, HARNESS_TWO_PROCESSES = 100_000.0, 1.6


def _main_op(doc: dict[str, Any]) -> dict[str, Any]:
    """The run phase's busiest operation (what a write-only or read-only run did)."""
    ops = run_operations({"phases": doc["phases"]})
    return max(ops.values(), key=lambda s: s["count"]) if ops else {}


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["phases"]["run"]


# -------------------------------------------------------------------------------- store-write
def store_write(runs: Runs) -> list[str]:
    rows = []
    for doc in runs.values():
        op, base = _main_op(doc), doc.get("baseline") or {}
        native = base.get("native") or {}
        goal = ""
        if doc["backend"] == "indexed_fs" and doc["config"]["threads"] == 1 and base.get("ratio"):
            goal = target(base["ratio"] >= PUT_OVER_PYTHON_LOOP,
                          f"≥ {PUT_OVER_PYTHON_LOOP}x Python loop")
        rows.append([doc["backend"], str(doc["config"]["threads"]), num(_run(doc)["operations_done"]),
                     num(_run(doc)["throughput_ops_sec"]), num(op.get("p50_us")),
                     num(op.get("p99_us")), num(base.get("throughput_ops_sec")),
                     times(base.get("ratio")), num(native.get("throughput")),
                     times(native.get("ratio")), goal])
    return md_table(["backend", "threads", "puts", "puts/s", "p50 µs", "p99 µs",
                     "fdatasync loop (Python) puts/s", "x Python loop",
                     "fdatasync loop (C) puts/s", "x C loop", "target"], rows)


def store_write_headline(runs: Runs) -> str:
    parts = []
    for doc in runs.values():
        native = (doc.get("baseline") or {}).get("native") or {}
        parts.append(f"{doc['backend']} x{doc['config']['threads']} "
                     f"{num(_run(doc)['throughput_ops_sec'])} ({times(native.get('ratio'))})")
    return "durable puts/s (x the C fdatasync loop): " + ", ".join(parts)


# ------------------------------------------------------------------------------ store-scaling
def _cpus(doc: dict[str, Any]) -> str:
    asked = doc.get("config", {}).get("cpus")
    allowed = doc.get("environment", {}).get("cpus_allowed") or []
    if not asked:
        return "unpinned"
    return f"{asked} (CPU {' '.join(map(str, allowed))})"


def _medians(doc: dict[str, Any]) -> dict[tuple[str, int], list[float]]:
    out: dict[tuple[str, int], list[float]] = {}
    for e in doc["results"]:
        if not e["skipped"] and e["params"].get("threads") is not None:
            out.setdefault((e["backend"], e["params"]["threads"]), []).append(e["throughput_ops_sec"])
    return out


def store_scaling(runs: Runs) -> list[str]:
    rows = []
    for doc in runs.values():
        cpus = _cpus(doc)
        for (backend, threads), values in _medians(doc).items():
            rows.append([cpus, f"{backend} puts/s, {threads} thread{'s' * (threads > 1)}",
                         num(statistics.median(values)), " ".join(num(v) for v in values), ""])
        goals = {"indexed_fs threads 16/1": GROUP_COMMIT_SCALING,
                 "indexed_fs/default_fs threads 16": INDEXED_OVER_DEFAULT}
        for r in doc.get("ratios") or sweep_ratios(doc):
            goal = goals.get(r["what"])
            rows.append([cpus, r["what"], times(r["median"]),
                         " ".join(f"{v:.2f}" for v in r["rounds"]),
                         target(r["median"] >= goal, f"≥ {goal:g}x") if goal else ""])
    return md_table(["CPUs", "measure", "median", "each round", "target"], rows)


def store_scaling_headline(runs: Runs) -> str:
    """The first backend's scaling and the backends' ratio at the most threads, per placement
    (:func:`experiments.results.sweep_ratios` lists them first and last)."""
    parts = []
    for doc in runs.values():
        ratios = doc.get("ratios") or sweep_ratios(doc)
        if ratios:
            parts.append(f"{_cpus(doc)}: {ratios[0]['what']} {times(ratios[0]['median'])}, "
                         f"{ratios[-1]['what']} {times(ratios[-1]['median'])}")
    return "medians of interleaved rounds, " + "; ".join(parts)


# ------------------------------------------------------------------------------- store-reopen
def store_reopen(runs: Runs) -> list[str]:
    rows = []
    for doc in runs.values():
        rec, stats = doc["recovery"], doc.get("backend_stats") or {}
        scanned = stats.get("records_scanned")
        index = (f"snapshot {stats['snapshot_used']}" if stats.get("snapshot_used")
                 else f"scan of {num(scanned)} records" if scanned is not None else "-")
        bound = REOPEN_CRASH_MS if rec["crash"] else REOPEN_CLEAN_MS
        goal = (target(rec["open_ms"] <= bound, f"≤ {num(bound)} ms")
                if doc["config"]["records"] == REOPEN_KEYS else f"set for {num(REOPEN_KEYS)} keys")
        rows.append(["SIGKILL" if rec["crash"] else "clean close", num(doc["config"]["records"]),
                     num(rec["open_ms"]), index, num(_run(doc)["operations_done"]),
                     str(rec["missing"]), str(rec["corrupt"]), goal])
    return md_table(["reopen after", "keys", "open ms", "index from", "keys read back",
                     "missing", "corrupt", "target"], rows)


def store_reopen_headline(runs: Runs) -> str:
    by = {("crash" if d["recovery"]["crash"] else "clean"): d for d in runs.values()}
    keys = num(next(iter(runs.values()))["config"]["records"])
    return (f"{keys} keys: reopen in {num(by['clean']['recovery']['open_ms'])} ms after a clean "
            f"close, {num(by['crash']['recovery']['open_ms'])} ms after SIGKILL")


# ------------------------------------------------------------------------------------ harness
def harness(runs: Runs) -> list[str]:
    rows, first = [], None
    for doc in runs.values():
        op, tput = _main_op(doc), _run(doc)["throughput_ops_sec"]
        processes = doc["config"].get("processes") or 1
        if first is None:
            first = tput
            goal = target(tput >= HARNESS_OPS, f"≥ {num(HARNESS_OPS)} ops/s")
        else:
            goal = target(tput >= HARNESS_TWO_PROCESSES * first, f"≥ {HARNESS_TWO_PROCESSES}x")
        rows.append([str(processes), str(doc["config"]["threads"]),
                     num(_run(doc)["operations_done"]), num(tput), times(tput / first),
                     num(op.get("p50_us")), num(op.get("p99_us")), goal])
    return md_table(["processes", "threads", "ops", "ops/s", "x 1 process", "p50 µs", "p99 µs",
                     "target"], rows)


def harness_headline(runs: Runs) -> str:
    return "memory backend: " + ", ".join(
        f"{num(_run(d)['throughput_ops_sec'])} ops/s with {d['config'].get('processes') or 1} "
        f"process{'es' * ((d['config'].get('processes') or 1) > 1)}" for d in runs.values())


# --------------------------------------------------------------------------- checkpoint-drops
def checkpoint_drops(runs: Runs) -> list[str]:
    rows = []
    for doc in runs.values():
        ck = doc["checkpoint"]
        w = _run(doc)["operations"].get("CHECKPOINT-WRITE") or {}
        rows.append([doc["backend"], num(ck["spec"]["rate"]), num(ck["submitted"]),
                     num(ck["written"]), num(ck["dropped"]), num(ck["write_rate"]),
                     num(w.get("p50_us")), num(w.get("p99_us"))])
    return md_table(["backend", "events/s offered", "checkpoints", "written", "dropped",
                     "written/s", "write p50 µs", "write p99 µs"], rows)


def checkpoint_drops_headline(runs: Runs) -> str:
    return ", ".join(f"{d['backend']} dropped {num(d['checkpoint']['dropped'])} of "
                     f"{num(d['checkpoint']['submitted'])}" for d in runs.values()) + (
        f" at {num(next(iter(runs.values()))['checkpoint']['spec']['rate'])} events/s")


# ----------------------------------------------------------------------------------- backends
def backends(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    ran = [e for e in doc["results"] if not e["skipped"]]
    ops = sorted({n for e in ran for n in run_operations(e)})
    base = ran[0]["throughput_ops_sec"] if ran else None
    rows = []
    for e in doc["results"]:
        if e["skipped"]:
            rows.append([e["backend"], f"skipped: {e['skipped']}"] + ["-"] * (1 + 2 * len(ops)))
            continue
        cells = [e["backend"], num(e["throughput_ops_sec"]),
                 times(e["throughput_ops_sec"] / base if base else None)]
        for n in ops:
            s = run_operations(e).get(n) or {}
            cells += [num(s.get("p50_us")), num(s.get("p99_us"))]
        rows.append(cells)
    first = ran[0]["backend"] if ran else "first"
    head = ["backend", "ops/s", f"x {first}"]
    for n in ops:
        head += [f"{n} p50 µs", f"{n} p99 µs"]
    return md_table(head, rows)


def backends_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    return "write-heavy ops/s: " + ", ".join(
        f"{e['backend']} {'skipped' if e['skipped'] else num(e['throughput_ops_sec'])}"
        for e in doc["results"])


# ------------------------------------------------------------------------------------- thesis
def fig41(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    rows = []
    for e in doc["results"]:
        if e["skipped"]:
            rows.append([e["backend"], str(e["params"].get("threads", "-")), f"skipped: {e['skipped']}", "-"])
            continue
        mean = e["overall"].get("mean_us")
        rows.append([e["backend"], str(e["params"].get("threads")), num(e["throughput_ops_sec"]),
                     num(mean / 1000.0 if mean is not None else None)])
    return md_table(["backend", "threads", "ops/s", "mean latency ms"], rows)


def fig41_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    best = doc["summary"]["max_throughput_ops_sec"]
    return "most write-heavy ops/s: " + ", ".join(f"{b} {num(t)}" for b, t in best.items())


def fig42(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    return md_table(["PEs", "load ms", "open after crash ms", "open after clean close ms"],
                    [[num(r["pes"]), num(r["load_ms"]), num(r["open_after_crash_ms"]),
                      num(r["open_after_clean_ms"])] for r in doc["rows"]])


def fig42_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    r = doc["rows"][-1]
    return (f"{num(r['pes'])} PEs: index rebuilt in {num(r['open_after_crash_ms'])} ms after a "
            f"crash, {num(r['open_after_clean_ms'])} ms after a clean close")


def fig45(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    rows = []
    for r in doc["rows"]:
        if r["skipped"]:
            rows.append([r["backend"], f"skipped: {r['skipped']}"] + ["-"] * 5)
            continue
        rows.append([r["backend"], num(r["write"]["mean_us"]), num(r["write"]["p99_us"]),
                     num(r["read"]["mean_us"]), num(r["read"]["p99_us"]),
                     num(r["checkpoint"]["dropped"]), num(r["open_ms"])])
    return md_table(["backend", "write mean µs", "write p99 µs", "lazy read mean µs",
                     "lazy read p99 µs", "dropped", "reopen ms"], rows)


def fig45_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    by = {r["backend"]: r for r in doc["rows"] if not r["skipped"]}
    d, i = by["default_fs"], by["indexed_fs"]
    parts = [f"indexed_fs writes {times(d['write']['mean_us'] / i['write']['mean_us'])}, lazy "
             f"recovery reads {times(d['read']['mean_us'] / max(i['read']['mean_us'], 1e-9))} "
             f"faster than default_fs"]
    parts += [f"{r['backend']} skipped" for r in doc["rows"] if r["skipped"]]
    return "; ".join(parts)


def fig47(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    return md_table(["backend", "PEs", "checkpoints/s", "written", "dropped"],
                    [[r["backend"], num(r["pes"]), num(r["write_rate"]), num(r["written"]),
                      num(r["dropped"])] for r in doc["rows"]])


def fig47_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    by: dict[str, list[float]] = {}
    for r in doc["rows"]:
        by.setdefault(r["backend"], []).append(r["write_rate"])
    pes = [r["pes"] for r in doc["rows"]]
    return (f"checkpoints/s over {num(min(pes))}-{num(max(pes))} PEs: "
            + ", ".join(f"{b} {num(min(v))}-{num(max(v))}" for b, v in by.items()))


def table52(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    rows = []
    for r in doc["rows"]:
        q = r.get("queue_ckpt_sec_by_pes") or {}
        rows.append([r["backend"], r.get("dependency", "-"), r.get("durability", "-"),
                     num(r.get("max_write_heavy_ops_sec")), num(r.get("write_mean_us")),
                     num(r.get("read_mean_us")),
                     " ".join(f"{num(v)} ({num(int(k))})" for k, v in q.items()) or "-",
                     f"skipped: {r['skipped']}" if r.get("skipped") and "write_mean_us" not in r
                     else ""])
    return md_table(["backend", "dependency", "durability", "most write-heavy ops/s",
                     "checkpoint write µs", "lazy read µs", "queue checkpoints/s (PEs)", "note"],
                    rows)


def table52_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    return ("the stores side by side: " + ", ".join(r["backend"] for r in doc["rows"])
            + " (dependency, durability, figures from fig4.1, fig4.5, fig4.7)")


# ---------------------------------------------------------------------------- storage-compare
def storage_compare(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    media = [m["name"] for m in doc["media"]]
    rows_by: dict[str, dict[str, str]] = {}

    def put(measure: str, medium: str, value: str) -> None:
        rows_by.setdefault(measure, {})[medium] = value

    size = max(doc["config"]["sizes"])
    for r in doc["rows"]:
        m, sec = r["medium"], r["section"]
        if sec == "table5.1" and r["ops_requested"] == size:
            what = (f"Table 5.1 {r['pattern']}{', sync each' if r['sync_per_op'] else ''} "
                    f"({num(size)} x 10 B), ops/s")
            put(what, m, "skipped" if r["skipped"] else
                num(r["ops_per_sec"]) + (f" ({num(r['ops'])} run)" if r["capped"] else ""))
        elif sec == "write-heavy":
            put(f"write-heavy {r['backend']} x{r['threads']}, ops/s", m,
                "skipped" if r["skipped"] else num(r["throughput_ops_sec"]))
        elif sec == "recovery":
            for label in ("clean", "crash"):
                put(f"indexed_fs open after {'clean close' if label == 'clean' else 'crash'} "
                    f"({num(r['keys'])} keys), ms", m,
                    "skipped" if r["skipped"] else num(r[f"open_after_{label}_ms"]))
        elif sec == "rpc":
            put(f"RPCs per {r['operation']}", m,
                "skipped" if r["skipped"] else f"{r['rpcs_per_op']:.2f}")
    for key, value in doc["summary"].items():
        _, medium, threads = key.split("/")
        put(f"write-heavy indexed_fs/default_fs {threads}", medium, times(value))
    return md_table(["measure"] + media,
                    [[what] + [cells.get(m, "-") for m in media] for what, cells in rows_by.items()])


def storage_compare_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    most = f"x{max(doc['config']['threads'])}"
    parts = [f"{k.split('/')[1]} {times(v)}" for k, v in doc["summary"].items()
             if k.split("/")[2] == most]
    return f"write-heavy indexed_fs/default_fs with {most[1:]} threads: " + ", ".join(parts)


# -------------------------------------------------------------------------------------- peers
def peer_redis(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    return md_table(["clients", "pipeline", "placement", "redis-benchmark SET/s (each run)",
                     "ckptbench puts/s (each round)", "ratio (median round)"],
                    [[str(doc["clients"]), str(doc["pipeline"]), doc["placement"],
                      " ".join(num(v) for v in doc["peer_throughput"]),
                      " ".join(num(v) for v in doc["ours_throughput"]), times(doc["ratio"])]])


def peer_redis_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    return (f"the redis backend at {times(doc['ratio'])} redis-benchmark's SET rate "
            f"({doc['clients']} clients, pipeline {doc['pipeline']})")


# ------------------------------------------------------------------------------- spark-matrix
def spark_matrix(runs: Runs) -> list[str]:
    (doc,) = runs.values()
    rows = []
    for r in doc["rows"]:
        eo = "-" if r["exactly_once"] is None else str(r["exactly_once"]).lower()
        rows.append([r["protocol"], r["backend"], num(r["throughput"]), times(r.get("ratio_none")),
                     times(r.get("ratio_spark_state")), num(r["checkpoint_ms"]),
                     num(r["recovery_ms"]), eo])
    return md_table(["protocol", "backend", "events/s", "x none", "x spark-state",
                     "checkpoint ms", "recovery ms", "exactly once"], rows)


def spark_matrix_headline(runs: Runs) -> str:
    (doc,) = runs.values()
    return "events/s relative to no checkpointing: " + ", ".join(
        f"{r['protocol']}{'' if r['backend'] == '-' else ' on ' + r['backend']} "
        f"{times(r.get('ratio_none'))}" for r in doc["rows"] if r["protocol"] != "none")
