"""``bench spark-matrix``: every protocol x backend on one local SparkSession, measured in
interleaved rounds, as rows for a table, JSON and PNG.

The method, for a shared machine and a JVM that keeps getting faster:

* **Warm-up first.**  Every combination runs ``warmup`` times (rounds of the whole plan, 2 by
  default) before anything is recorded.  The session's JVM compiles Spark's code paths as they get hot, and each
  protocol brings its own (LOG.io's logging stage is one more ``mapInArrow``; the backends' modules
  load in the Python workers on first use); a run that comes before that is finished is slower for
  reasons that have nothing to do with its protocol (docs/spark.md, "Why none looked slower").
* **Interleaved rounds.**  ``rounds`` times, every combination runs once, in an order rotated by
  one place per round (:func:`round_order`), so no row always comes first, and a slow minute of
  the machine hits every row of a round alike.
* **Medians and spread.**  A row reports the median of its rounds and their range
  (:func:`experiments.core.compare.median_spread`); its ratio to a reference (``none``, every baseline)
  is computed *within* each round — the reference and the row ran minutes apart at most — and the
  median of those per-round ratios is reported.  The same holds for every ``[SPARK]`` line in a
  row's ``metrics`` (:func:`median_metrics`): the recovery phases (``Recovery.*``, which the
  recovery chart stacks) are each the median over the rounds, beside their range in
  ``recovery_phases``, and every round's own phases stay in the row's ``rounds`` list.  A median
  is taken per phase, so the phases of a row need not add up to its median ``recovery_ms``.
* **Work done.**  Each row records what its runs did: events, micro-batches, checkpoints, bytes
  checkpointed, bytes the senders logged (:func:`spark_integration.protocols.sender_log.logged_bytes`)
  and backend operations, so a fast row that skipped work shows it.
* **Warm-up is visible.**  Every run records the CPU time the session's JVM spent on it
  (:func:`jvm_cpu_seconds`): the same job costs the JVM much more while it is still compiling, so
  the JSON shows whether the warm-up was long enough.
* **Skips are not zeros.**  A combination whose backend cannot be reached is kept as a skipped row
  with the reason; the table prints ``–`` for its figures.

A protocol that uses no backend (``none``) runs once per round; so does every registered baseline
(Spark's own RocksDB state store, ``spark-state``) that covers the job, unless disabled.  Any
protocol the registry lists can be named: what it takes comes from its registration.  Path
backends get a fresh temporary directory per run; server backends (redis, hbase, minio) are
started/located through :mod:`services` and get their own namespace per run (plus the job's own
``<jobId>/<owner>/`` key prefix).  With ``--fail-at`` every run that takes injected failures gets
them, so its throughput includes the recovery.  The chart is
:func:`experiments.report.plots.plot_spark_matrix`.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable

from spark_integration.conf import build
from spark_integration.job import JobSpec
from spark_integration.layouts.registry import DEFAULT as DEFAULT_LAYOUT, DEFAULT_CHUNK_BYTES
from spark_integration.protocols.registry import protocol_names, registration
from spark_integration.queries import query
from spark_integration.runner import run_job
from spark_integration.skew import parse_skew
from spark_integration.state_size import parse_state_size

from experiments.core import results
from experiments.core.compare import median_spread
from experiments.core.format import text_table
from experiments.core.prices import load as load_prices
from experiments.spark.advise import cost_inputs
from experiments.spark.cost import cost_report
from experiments.spark.job import latency_over_time
from experiments.spark.matrix_result import (ALL_LINE, NO_CHECKPOINTS, STEADY_LINE, Matrix, RoundRun, Row, Spread,
                                            WarmupRun, overhead_us, ratio_to_none, reference_metrics)
from experiments.spark.session import spark_session

SCHEMA = Matrix.SCHEMA
#: warm-up rounds by default: after one, the JVM still spends about a fifth more CPU per run in
#: the first measured round than in the next (the matrix's own JVM CPU line shows it)
WARMUP_ROUNDS = 2
#: where the matrix writes when no --json/--png is given (bench's own results directory)
DEFAULT_JSON = "results/spark-matrix.json"
DEFAULT_PNG = "results/spark-matrix.png"
#: the work counters of a run, over the whole run: JSON name -> the job's ``[SPARK]`` metric
#: (``events`` is the job's input; ``measured_events`` the part the throughput is measured on)
WORK = {"measured_events": "Events", "replayed_events": "ReplayedEvents", "batches": "Batches",
        "checkpoints": "Checkpoints", "checkpoint_bytes": "CheckpointBytes", "logged_bytes": "LoggedBytes",
        "backend_ops": "BackendOps"}
#: the per-run figures a row summarizes as median and spread
FIGURES = ("throughput", "checkpoint_ms", "recovery_ms", "restart_ms")
#: what the table prints for a figure a row does not have (skipped, or no reference in a round)
MISSING = "–"
#: the prefix of a run's recovery-phase lines (``Recovery.Detect(ms)``...: per-episode means)
RECOVERY = "Recovery."

Plan = list[tuple[str, "str | None"]]


def references() -> list[str]:
    """The protocols that run without a backend, and whose throughput the ratios divide by."""
    return [n for n in protocol_names() if not registration(n).uses_backend]


def ratio_key(reference: str) -> str:
    """The key of ``reference`` in :attr:`Row.ratio` (written as ``ratio_<key>``)."""
    return reference.replace("-", "_")


def baselines_for(spec: JobSpec) -> list[str]:
    """The registered baselines that cover ``spec``'s job."""
    operator = query(spec.kind).operator
    return [n for n in protocol_names(baseline=True) if registration(n).supports(operator)]


def plan_for(protocols: list[str], backends: list[str], spec: JobSpec, baselines: bool = True) -> Plan:
    """The combinations, in the order given: protocols without a backend once, the others on every
    backend, then the baselines not named already."""
    plan: Plan = []
    for p in dict.fromkeys(protocols):
        plan += [(p, None)] if not registration(p).uses_backend else [(p, b) for b in backends]
    if baselines:
        plan += [(p, None) for p in baselines_for(spec) if p not in protocols]
    return plan


def round_order(plan: Plan, round_index: int) -> Plan:
    """Round ``round_index`` (0-based) runs the plan rotated left by that many places: over
    ``len(plan)`` rounds every combination runs once in every position."""
    if not plan:
        return []
    k = round_index % len(plan)
    return plan[k:] + plan[:k]


def backend_options(backend: str, namespace: str, tmp: str) -> dict[str, Any]:
    """Options reaching ``backend`` from this machine: a temp dir, or the running server's."""
    from backends import backend_class

    if backend_class(backend).keeps_a_directory():
        return {"path": f"{tmp}/{namespace}"}
    import services

    services.up([backend])
    return dict(services.client_options(backend, namespace))


@dataclass(frozen=True)
class Where:
    """Where a matrix's runs take place: how a run reaches its backend (``options(backend,
    namespace, tmp)``), what becomes of its settings before it starts (``place``), the hosts that
    die in a run that takes failures (``node_losses``, :mod:`spark_integration.node_loss`) and
    what is done after such a run (``after_loss``: bring the lost hosts back, so every run of the
    matrix starts on the same hosts; its time counts in the run's ``seconds``, never in its
    figures).  ``node_losses`` makes them afresh for each run: a
    :class:`~spark_integration.node_loss.NodeLoss` records its own strike.  :data:`HERE` is this
    machine."""

    options: Callable[[str, str, str], dict[str, Any]] = backend_options
    place: Callable[[Any], Any] = lambda settings: settings  # noqa: E731
    node_losses: Callable[[], tuple] = tuple
    after_loss: Callable[[], Any] = lambda: None  # noqa: E731


#: the runs on this machine's own session
HERE = Where()


@dataclass(frozen=True)
class StateSetup:
    """What each key holds and how its checkpoints are laid out: the same for every run of a
    matrix, so its rows differ only in protocol and store."""

    state_bytes: str = "0"
    layout: str = DEFAULT_LAYOUT
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    cold_restore: bool = False


def run_one(spark: Any, protocol: str, backend: str | None, spec: JobSpec, fail_at: list[int],
            interval: int, tmp: str, fail_instance: int = 0,
            state: StateSetup = StateSetup(), where: Where = HERE) -> dict[str, Any]:
    """One run of one combination: its figures, the work it did and its ``[SPARK]`` metrics.

    The matrix, CheckMate's grid and LOG.io's straggler runs all go through here: the protocol's
    registration decides whether ``backend`` is used and whether ``fail_at`` (and ``where``'s node
    losses) apply."""
    reg = registration(protocol)
    ns = f"m{uuid.uuid4().hex[:8]}"
    backend = backend if reg.uses_backend else None
    settings = build(protocol, backend, where.options(backend, ns, tmp) if backend else None,
                     interval=interval, job_id=ns, state_dir=f"{tmp}/work",
                     fail_at=fail_at if reg.failure_injection else (), fail_instance=fail_instance,
                     state_bytes=state.state_bytes, layout=state.layout, chunk_bytes=state.chunk_bytes,
                     cold_restore=state.cold_restore)
    losses = where.node_losses() if reg.failure_injection else ()
    try:
        metrics = run_job(spark, where.place(settings), spec, losses)
    finally:
        if losses:
            where.after_loss()
    s = dict(metrics.summary())
    return {"protocol": protocol, "backend": backend or "-", "throughput": s[measured_line(spec)],
            "checkpoint_ms": s["CheckpointTime(ms)"],
            "recovery_ms": s["RecoveryTime(ms)"], "restart_ms": s["RestartTime(ms)"],
            "failures": s["Failures"], "exactly_once": metrics.exactly_once, "verify_detail": metrics.verify_detail,
            # a figure the run could not measure (an "n/a (why)" line) is left out of its work
            "work": {"events": spec.events, **{k: s.get(m, 0) for k, m in WORK.items()
                                               if not isinstance(s.get(m, 0), str)}}, "metrics": s,
            "latency": latency_over_time(metrics),
            "orphans": orphan_summary(metrics.orphans),
            "cost": cost_inputs(cost_report(metrics, backend, load_prices()), backend)}


def orphan_summary(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """One run's orphan report (:func:`spark_integration.orphans.report`) as a matrix cell:
    objects and bytes before and after the protocol's GC, and whether the count grew."""
    if report is None:
        return None
    return {"before_objects": report["before_gc"]["objects"], "before_bytes": report["before_gc"]["bytes"],
            "after_objects": report["after_gc"]["objects"], "after_bytes": report["after_gc"]["bytes"],
            "after_kinds": {k: v["objects"] for k, v in report["after_gc"]["kinds"].items()},
            "growing": report["growing"]}


def jvm_cpu_seconds(spark: Any) -> float | None:
    """CPU time (user + system) the session's JVM has used so far, from ``/proc`` (None where
    there is no ``/proc`` or the JVM is not on this machine)."""
    import os

    try:
        pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _skip_reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()


def measured_line(spec: JobSpec) -> str:
    """The ``[SPARK]`` line a run's events/s (and every ratio of it) is taken from: a job with a
    load phase (``--skew load+...``) is measured after it, as YCSB reports its run phase apart
    from its load and as the state experiment's ``steady x none`` is: the load inserts every
    key and the checkpoint after it writes them all, once, which a job holding its state pays
    at its start, not per interval; any other job over all its micro-batches."""
    return STEADY_LINE if parse_skew(spec.skew).load_events(spec.keys) else ALL_LINE


def run_rounds(spark: Any, plan: Plan, spec: JobSpec, fail_at: list[int], interval: int = 1,
               rounds: int = 3, warmup: int = WARMUP_ROUNDS, echo: Callable[..., None] = print,
               state: StateSetup = StateSetup(),
               where: Where = HERE) -> tuple[list[dict[str, Any]], dict[str, str], list[dict[str, Any]]]:
    """Warm-up rounds, then ``rounds`` interleaved rounds of ``plan``.

    Returns (runs, skipped, warm-up runs): every recorded run with its round and position, the
    combinations whose backend could not be reached (label -> reason), and the warm-up runs'
    throughputs (kept in the JSON, never in a median)."""
    from backends import BackendUnavailableError
    from services.common import ServiceError

    tmp = tempfile.mkdtemp(prefix="ckptbench-matrix-")
    runs: list[dict[str, Any]] = []
    warm: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    try:
        schedule = [(-(w + 1), plan) for w in range(warmup)] + [(r, round_order(plan, r)) for r in range(rounds)]
        for r, order in schedule:
            for pos, (protocol, backend) in enumerate(order):
                name = label(protocol, backend)
                if name in skipped:
                    continue
                what = f"warm-up {-r}" if r < 0 else f"round {r + 1}/{rounds}"
                echo(f"# {what}: {name} ...", flush=True)
                t0, cpu0 = time.time(), jvm_cpu_seconds(spark)
                try:
                    run = run_one(spark, protocol, backend, spec, fail_at, interval, tmp, state=state,
                                  where=where)
                except (BackendUnavailableError, ServiceError, ConnectionError, ImportError) as exc:
                    # the backend's server or client is missing: a skipped row, never a zero
                    skipped[name] = _skip_reason(exc)
                    echo(f"# {name} skipped: {skipped[name]}", flush=True)
                    continue
                cpu1 = jvm_cpu_seconds(spark)
                run.update(position=pos, seconds=round(time.time() - t0, 2),
                           jvm_cpu_s=round(cpu1 - cpu0, 2) if cpu0 is not None and cpu1 is not None else None)
                if r < 0:
                    warm.append({"warmup": -r, "protocol": protocol, "backend": backend or "-",
                                 "throughput": run["throughput"], "jvm_cpu_s": run["jvm_cpu_s"]})
                else:
                    runs.append({"round": r + 1, **run})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return runs, skipped, warm


def label(protocol: str, backend: str | None) -> str:
    return protocol if backend in (None, "-") else f"{protocol}/{backend}"


def recovery_phases(metrics: dict[str, Any]) -> dict[str, Any]:
    """The ``Recovery.*`` lines of one run's ``[SPARK]`` metrics."""
    return {k: v for k, v in metrics.items() if k.startswith(RECOVERY)}


def median_metrics(per_round: list[dict[str, Any]]) -> dict[str, Any]:
    """Each ``[SPARK]`` line's median over the rounds that report it (a line that is not a number
    keeps the last round's value), so that no figure of a row comes from a single round."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for m in per_round for k in m):
        values = [m[key] for m in per_round
                  if isinstance(m.get(key), (int, float)) and not isinstance(m.get(key), bool)]
        out[key] = statistics.median(values) if values else next(m[key] for m in reversed(per_round) if key in m)
    return out


def summarize(plan: Plan, runs: list[dict[str, Any]], skipped: dict[str, str]) -> list[Row]:
    """One row per combination: medians and spread over its rounds (the recovery phases each on
    their own), per-round ratios to every reference that ran in the same round and the µs per
    event over ``none``'s in the same round, the work done, exactly-once over all rounds."""
    refs = [p for p, b in plan if b is None and p in references()]
    by_round: dict[tuple[int, str], float] = {(r["round"], r["protocol"]): r["throughput"]
                                              for r in runs if r["backend"] == "-"}
    rows = []
    for protocol, backend in plan:
        name = label(protocol, backend)
        mine = [r for r in runs if r["protocol"] == protocol and r["backend"] == (backend or "-")]
        row = Row(protocol=protocol, backend=backend or "-", lost=skipped.get(name) if mine else None)
        if not mine:
            row.skipped = skipped.get(name, "did not run")
            row.ratio = {ratio_key(ref): None for ref in references()}
            rows.append(row)
            continue
        for key in FIGURES:
            spread = Spread(**median_spread([r[key] for r in mine]))
            setattr(row, key, spread.median)
            setattr(row, key + "_spread", spread)
        for ref in references():
            per_round = [r["throughput"] / by_round[(r["round"], ref)] for r in mine
                         if ref in refs and by_round.get((r["round"], ref))]
            row.ratio[ratio_key(ref)] = round(statistics.median(per_round), 3) if per_round else None
            if per_round:
                row.ratio_spread[ratio_key(ref)] = Spread(**{
                    k: [round(x, 3) for x in v] if isinstance(v, list) else round(v, 3)
                    for k, v in median_spread(per_round).items()})
        added = [overhead_us(r["throughput"], by_round[(r["round"], NO_CHECKPOINTS)]) for r in mine
                 if NO_CHECKPOINTS in refs and r["throughput"] and by_round.get((r["round"], NO_CHECKPOINTS))]
        row.overhead_us = round(statistics.median(added), 3) if added else None
        verdicts = [r["exactly_once"] for r in mine if r["exactly_once"] is not None]
        row.exactly_once = all(verdicts) if verdicts else None
        row.failures = statistics.median(r["failures"] for r in mine)
        row.work = {k: statistics.median(r["work"][k] for r in mine) for k in mine[0]["work"]}
        row.metrics = median_metrics([r["metrics"] for r in mine])
        row.orphans = [r["orphans"] for r in mine if r.get("orphans") is not None] or None
        row.cost = next((r["cost"] for r in reversed(mine) if r.get("cost")), None)
        phases = [recovery_phases(r["metrics"]) for r in mine]
        row.recovery_phases = {k: Spread(**median_spread([p[k] for p in phases if k in p]))
                               for k in recovery_phases(row.metrics)}
        row.rounds = [RoundRun(r.get("round"), r.get("position"), r.get("throughput"),
                               r.get("checkpoint_ms"), r.get("recovery_ms"), r.get("exactly_once"),
                               r.get("work"), r.get("seconds"), r.get("jvm_cpu_s"), p)
                      for r, p in zip(mine, phases)]
        rows.append(row)
    return rows


def run_matrix(spark: Any, protocols: list[str], backends: list[str], spec: JobSpec, fail_at: list[int],
               interval: int = 1, baselines: bool = True, rounds: int = 3, warmup: int = WARMUP_ROUNDS,
               echo: Callable[..., None] = print, state: StateSetup = StateSetup(),
               where: Where = HERE) -> Matrix:
    """The whole method on ``spark``: the matrix document (rows, warm-up, settings); the
    baselines carry the same state (``state.state_bytes``) and take the same failures."""
    if rounds < 1 or warmup < 0:
        raise ValueError("--rounds must be >= 1 and --warmup >= 0")
    state = replace(state, state_bytes=str(parse_state_size(state.state_bytes)))
    plan = plan_for(protocols, backends, spec, baselines)
    runs, skipped, warm = run_rounds(spark, plan, spec, fail_at, interval, rounds, warmup, echo, state, where)
    return Matrix(job=spec, state_bytes=state.state_bytes, layout=state.layout,
                  chunk_bytes=state.chunk_bytes, cold_restore=state.cold_restore,
                  fail_at=fail_at, interval=interval, rounds=rounds,
                  warmup_rounds=warmup, order="rotated by one place per round",
                  warmup=[WarmupRun(**w) for w in warm], rows=summarize(plan, runs, skipped),
                  measured=measured_line(spec))


def run(protocols: list[str], backends: list[str], spec: JobSpec, fail_at: list[int], interval: int = 1,
        baselines: bool = True, master: str = "local[2]", rounds: int = 3, warmup: int = WARMUP_ROUNDS,
        echo: Callable[..., None] = print, state: StateSetup = StateSetup()) -> Matrix:
    """:func:`run_matrix` on a session of its own (started and stopped here)."""
    wanted = protocols + (baselines_for(spec) if baselines else [])
    with spark_session(master, wanted) as spark:
        return run_matrix(spark, protocols, backends, spec, fail_at, interval, baselines, rounds, warmup, echo,
                          state)


# ----------------------------------------------------------------------------------- output
def _num(value: Any, fmt: str) -> str:
    return MISSING if value is None else format(value, fmt)


def _spread(row: Row, key: str, fmt: str) -> str:
    s = row.spread(key)
    if not s or len(s.rounds) < 2:
        return MISSING if getattr(row, key) is None else ""
    return f"{format(s.min, fmt)}–{format(s.max, fmt)}"


def format_table(rows: list[Row], after_load: bool = False) -> str:
    """Medians, their range over the rounds, ratios (median of per-round ratios), the work done;
    ``–`` where a row has no figure.  ``after_load``: the events/s are of the micro-batches
    after the job's load phase (:func:`measured_line`), which a line under the table says."""
    refs = references()
    head = ("protocol", "backend", "events/s", "range", *(f"x {ref}" for ref in refs), "+µs/event", "ckpt ms",
            "recovery ms", "ckpts", "ckpt MB", "logged MB", "ExactlyOnce")
    lines = []
    none = reference_metrics(rows)

    def ratio(r: Row, ref: str) -> str:
        """The ratio to ``none`` says when a run is too short for it (the others are baselines)."""
        fmt = lambda v: _num(v, ".2f")  # noqa: E731
        value = r.ratio.get(ratio_key(ref))
        return ratio_to_none(value, r.metrics, r.protocol, none, fmt) if ref == NO_CHECKPOINTS else fmt(value)
    for r in rows:
        eo = MISSING if r.exactly_once is None else str(r.exactly_once).lower()
        work = r.work or {}
        mb = lambda k: _num(work[k] / 1e6 if k in work else None, ".2f")  # noqa: E731
        lines.append([r.protocol, r.backend, _num(r.throughput, ",.0f"),
                      _spread(r, "throughput", ",.0f"),
                      *(ratio(r, ref) for ref in refs),
                      ratio_to_none(r.overhead_us, r.metrics, r.protocol, none, lambda v: _num(v, ".2f")),
                      _num(r.checkpoint_ms, ".1f"), _num(r.recovery_ms, ".0f"),
                      _num(work.get("checkpoints"), ".0f"), mb("checkpoint_bytes"), mb("logged_bytes"), eo])
    out = "\n".join(text_table(list(head), lines))
    skips = [f"{label(r.protocol, r.backend)} skipped: {r.skipped}" for r in rows if r.skipped]
    skips += [f"{label(r.protocol, r.backend)} later rounds lost: {r.lost}" for r in rows if r.lost]
    measured = ["events/s and ratios: the micro-batches after the load phase"] if after_load else []
    return "\n".join([out, *measured, *skips])


def orphan_table(rows: list[Row]) -> str | None:
    """With ``--orphans``: what each protocol left in each store off its recovery line, before
    and after its GC (the largest over the rounds), and whether it grew across checkpoints;
    None when no row counted."""
    lines = []
    for r in rows:
        if not r.orphans:
            continue
        worst = max(r.orphans, key=lambda o: (o["after_objects"], o["before_objects"]))
        kinds = " ".join(f"{k}={v}" for k, v in sorted(worst["after_kinds"].items())) or "-"
        lines.append([r.protocol, r.backend, str(worst["before_objects"]), f"{worst['before_bytes']:,}",
                      str(worst["after_objects"]), f"{worst['after_bytes']:,}", kinds,
                      "yes" if any(o["growing"] for o in r.orphans) else "no"])
    if not lines:
        return None
    head = ["protocol", "backend", "orphans", "bytes", "after GC", "bytes after GC", "kinds after GC", "growing"]
    return "\n".join(text_table(head, lines))


def summary_lines(doc: Matrix) -> list[str]:
    """``[MATRIX]`` lines: the method, and each row's median throughput over ``none``'s."""
    out = [f"[MATRIX], Rounds, {doc.rounds}", f"[MATRIX], WarmupRounds, {doc.warmup_rounds}"]
    key = ratio_key(NO_CHECKPOINTS)
    none = reference_metrics(doc.rows)
    for r in doc.rows:
        if r.lost:  # rounds missing from its medians: said where the progress lines are not
            out.append(f"[MATRIX], {label(r.protocol, r.backend)} later rounds lost, {r.lost}")
        if r.protocol != NO_CHECKPOINTS and r.ratio.get(key) is not None:
            out.append(f"[MATRIX], {label(r.protocol, r.backend)} / none (median of rounds), "
                       + ratio_to_none(r.ratio[key], r.metrics, r.protocol, none, lambda v: f"{v:.3f}"))
        if r.protocol != NO_CHECKPOINTS and r.overhead_us is not None:
            out.append(f"[MATRIX], {label(r.protocol, r.backend)} µs/event over none (median of rounds), "
                       + ratio_to_none(r.overhead_us, r.metrics, r.protocol, none, lambda v: f"{v:.3f}"))
    cpu = jvm_cpu_by_round(doc)
    if cpu:
        out.append("[MATRIX], JVM CPU per run (s; warm-up, then each round), "
                   + ", ".join(f"{name} {value:.2f}" for name, value in cpu))
    none = next((r for r in doc.rows if r.protocol == NO_CHECKPOINTS and r.throughput), None)
    others = [r.throughput for r in doc.rows if r.protocol != NO_CHECKPOINTS and r.throughput]
    if none and others:
        out.append(f"[MATRIX], none / fastest other row (medians), {none.throughput / max(others):.3f}")
    return out


def jvm_cpu_by_round(doc: Matrix) -> list[tuple[str, float]]:
    """The JVM's mean CPU time per run, in the warm-up and in each round (every round runs the same
    combinations, so a warm JVM shows as flat figures)."""
    groups: dict[str, list[float]] = {}
    for w in doc.warmup:
        if w.jvm_cpu_s is not None:
            groups.setdefault(f"warm-up {w.warmup}", []).append(w.jvm_cpu_s)
    for row in doc.rows:
        for r in row.rounds:
            if r.jvm_cpu_s is not None:
                groups.setdefault(f"round {r.round}", []).append(r.jvm_cpu_s)
    order = sorted(groups, key=lambda k: (not k.startswith("warm"), int(k.split()[-1])))
    return [(k, statistics.mean(groups[k])) for k in order]


def write_json(doc: Matrix, path: str) -> None:
    results.ensure_parent(path)
    results.write_json(path, doc)
