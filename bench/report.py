"""Results as YCSB's exporters write them (the JSON and CSV forms: :mod:`experiments.core.results`).

Every result is a list of ``(metric, measurement, value)`` rows, as YCSB's MeasurementsExporter
receives them; :func:`text` writes them as YCSB's TextMeasurementsExporter (``[METRIC],
Measurement, value`` per line) and :func:`json_array` as its JSONArrayMeasurementsExporter.  The
run phase uses YCSB's own sections (``[OVERALL]``, ``[READ]``, ``[UPDATE]``, ``[READ-FAILED]``,
``[Intended-READ]`` ...), so existing YCSB parsers read it unchanged.  Only the statuses that
occurred get a ``Return=`` line, as in YCSB (a parser that looks for ``Return=ERROR`` finds one
only when an operation failed).  The one-invocation workload commands print the load first with
every section prefixed ``LOAD-`` (``[LOAD-OVERALL]``, ``[LOAD-INSERT-BATCH]`` ...), so the two
phases never mix in a parser keyed on ``[INSERT]``; ``bench load`` and ``bench run`` print
their phase under YCSB's plain sections, as ``ycsb load`` and ``ycsb run`` do.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any, Iterable, TextIO

from workloads.client_properties import select_interval
from workloads.measure import OK, Measurements
from workloads.runner import PhaseResult

#: the percentiles printed unless ``hdrhistogram.percentiles`` says otherwise
PERCENTILES = (50.0, 95.0, 99.0, 99.9)

Row = tuple[str, str, Any]


def _num(value: Any) -> str:
    """Java's formatting of YCSB's numbers: longs as integers, doubles with their repr."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def ordinal(p: float) -> str:
    """YCSB's percentile label: ``95th``, ``99th``, ``1st`` ... for whole numbers, else ``99.9``."""
    if p % 1:
        return repr(float(p))
    n = int(p)
    if n % 100 in (11, 12, 13):
        return f"{n}th"
    return f"{n}{['th', 'st', 'nd', 'rd', 'th', 'th', 'th', 'th', 'th', 'th'][n % 10]}"


def measurement_rows(measurements: Measurements, prefix: str = "",
                     percentiles: Iterable[float] = PERCENTILES,
                     series: dict[str, list[tuple[int, float]]] | None = None) -> list[Row]:
    """Per-operation rows; ``Return=`` rows for the statuses that occurred, OK first.  With
    ``series`` (``measurementtype=timeseries``) as YCSB's OneMeasurementTimeSeries exports
    them: no percentiles, and after the statuses one ``[OP], <bucket ms>, <average µs>`` row
    per bucket."""
    rows: list[Row] = []
    for name in measurements.names():
        metric = f"{prefix}{name}"
        hist = measurements.histograms.get(name)
        count = hist.get_total_count() if hist is not None else 0
        if count:
            rows += [(metric, "Operations", count),
                     (metric, "AverageLatency(us)", float(hist.get_mean_value())),
                     (metric, "MinLatency(us)", hist.get_min_value()),
                     (metric, "MaxLatency(us)", hist.get_max_value())]
            if series is None:
                rows += [(metric, f"{ordinal(p)}PercentileLatency(us)",
                          hist.get_value_at_percentile(p)) for p in percentiles]
        statuses = measurements.statuses.get(name, {})
        for status in sorted(statuses, key=lambda st: (st != OK, st)):
            if statuses[status]:
                rows.append((metric, f"Return={status}", statuses[status]))
        if series is not None:
            rows += [(metric, str(t), float(avg)) for t, avg in series.get(name, [])]
    return rows


def phase_rows(phase: PhaseResult, prefix: str = "",
               percentiles: Iterable[float] = PERCENTILES) -> list[Row]:
    """``[OVERALL]`` (or ``[<prefix>OVERALL]``) runtime/throughput, then the per-op rows."""
    metric = f"{prefix}OVERALL"
    rows: list[Row] = [(metric, "RunTime(ms)", int(round(phase.runtime_ms))),
                       (metric, "Throughput(ops/sec)", float(phase.throughput))]
    if phase.keys:
        rows.append((metric, "Records", phase.keys))
    return rows + measurement_rows(phase.measurements, prefix, percentiles, phase.series)


def text(rows: Iterable[Row]) -> list[str]:
    """YCSB's text lines: ``[METRIC], Measurement, value``."""
    return [f"[{metric}], {measurement}, {_num(value)}" for metric, measurement, value in rows]


def json_array(rows: Iterable[Row]) -> str:
    """The JSON array YCSB's JSONArrayMeasurementsExporter writes (Jackson's default pretty
    printer: ``[ {`` ... ``}, {`` ... ``} ]``), one object per row."""
    objects = []
    for metric, measurement, value in rows:
        number = _num(value) if isinstance(value, (int, float)) else json.dumps(value)
        objects.append("{\n" f'  "metric" : {json.dumps(metric)},\n'
                       f'  "measurement" : {json.dumps(measurement)},\n'
                       f'  "value" : {number}\n' "}")
    return "[ " + ", ".join(objects) + " ]\n" if objects else "[ ]\n"


def measurement_lines(measurements: Measurements, prefix: str = "",
                      interval: str = "op") -> list[str]:
    """Per-operation lines (see :func:`measurement_rows`) of the latencies ``interval`` names
    (YCSB's ``measurement.interval``: ``op`` by default, so no ``[Intended-...]`` sections)."""
    return text(measurement_rows(select_interval(measurements, interval), prefix))


def phase_lines(phase: PhaseResult, prefix: str = "", interval: str = "op") -> list[str]:
    """``[OVERALL]`` (or ``[<prefix>OVERALL]``) runtime/throughput, then the per-op lines of
    the latencies ``interval`` names.  YCSB prints ``[Intended-<OP>]`` only with
    ``measurement.interval=intended|both``, never for a target rate alone: a parser that sums
    every section's ``Operations`` would count each operation twice."""
    return text(phase_rows(replace(phase, measurements=select_interval(phase.measurements, interval)),
                           prefix))


def checkpoint_lines(result: Any) -> list[str]:
    """The checkpoint workload: ``[OVERALL]`` (throughput = checkpoints written/s), the
    SafeKeeper's counts under ``[CHECKPOINT]``, then ``[CHECKPOINT-WRITE]`` and ``[EVENT-LAG]``."""
    lines = phase_lines(result.phase)
    at = lines.index(next(line for line in lines if "Throughput" in line)) + 1
    lines[at:at] = [
        f"[CHECKPOINT], Events, {result.submitted}",
        f"[CHECKPOINT], EventRate(events/sec), {_num(float(result.event_rate))}",
        f"[CHECKPOINT], Written, {result.written}",
        f"[CHECKPOINT], Dropped, {result.dropped}",
        f"[CHECKPOINT], Failed, {result.failed}",
        f"[CHECKPOINT], WriteRate(ckpt/sec), {_num(float(result.write_rate))}",
    ]
    return lines


def recovery_lines(recovery: Any) -> list[str]:
    """``[RECOVERY]``: crash or clean close, lazy or eager read-back, the timed reopen (with
    several, their median and range), what was read back and what was missing or corrupt
    (:class:`experiments.storage.recovery.Recovery`).  The read-back's per-operation lines follow from
    the caller."""
    verified = recovery.verified
    return [
        f"[RECOVERY], Crash, {'true' if recovery.crash else 'false'}",
        f"[RECOVERY], Eager, {'true' if recovery.eager else 'false'}",
        f"[RECOVERY], OpenTime(ms), {_num(float(recovery.open_ms))}",
        *([f"[RECOVERY], Reopens, {len(recovery.open_ms_rounds)}",
           f"[RECOVERY], OpenTimeMin(ms), {_num(float(min(recovery.open_ms_rounds)))}",
           f"[RECOVERY], OpenTimeMax(ms), {_num(float(max(recovery.open_ms_rounds)))}"]
          if recovery.open_ms_rounds else []),
        f"[RECOVERY], Records, {verified.phase.operations}",
        f"[RECOVERY], Missing, {verified.missing}",
        f"[RECOVERY], Corrupt, {verified.corrupt}",
        f"[RECOVERY], RunTime(ms), {int(round(verified.phase.runtime_ms))}",
    ]


def cost_lines(stats: dict[str, Any] | None, phase: PhaseResult) -> list[str]:
    """``[COST]``: what the store sent to its medium during the run phase (its request ledger,
    :mod:`backends.ledger`), in YCSB's shape (one number a line): requests in all and per
    operation, each type's count (``Requests.<type>``), bytes each way, retries and their wait.
    Nothing where the run has no ledger (``--processes``, Spark clients) or the store sent
    nothing (``memory``)."""
    ledger = ((stats or {}).get("ledger_by_phase") or {}).get("run")
    if not ledger or not (ledger["requests"] or ledger["sent_bytes"] or ledger["received_bytes"]):
        return []
    requests = ledger["requests"]
    total = sum(requests.values())
    return [f"[COST], Requests, {total}",
            f"[COST], Requests/op, {_num(total / phase.operations) if phase.operations else 0}",
            *(f"[COST], Requests.{k}, {v}"
              for k, v in sorted(requests.items(), key=lambda kv: (-kv[1], kv[0]))),
            f"[COST], SentBytes, {ledger['sent_bytes']}",
            f"[COST], ReceivedBytes, {ledger['received_bytes']}",
            f"[COST], Retries, {ledger['retries']}",
            f"[COST], RetryWait(ms), {_num(float(ledger['retry_wait_ms']))}",
            *_throttle_lines(stats or {}, ledger)]


def _throttle_lines(stats: dict[str, Any], ledger: dict[str, Any]) -> list[str]:
    """``Throttled`` (the answers that were ``503 SlowDown``) where the store is throttled or
    was, and the client's retry policy where the store names it."""
    lines = []
    if "throttle" in stats or ledger.get("throttled"):
        lines.append(f"[COST], Throttled(503 SlowDown), {ledger.get('throttled', 0)}")
    retry = stats.get("retry")
    if retry:
        lines.append(f"[COST], RetryMode, {retry['mode']} (at most {retry['max_attempts']} "
                     f"attempts a request)")
    return lines


def throttle_line(stats: dict[str, Any] | None) -> str | None:
    """One plain sentence on a throttled run: how many requests of the run phase were answered
    ``503 SlowDown``, how the client retried them and how long it waited; ``None`` for a store
    that was not throttled."""
    stats = stats or {}
    throttle, ledger = stats.get("throttle"), (stats.get("ledger_by_phase") or {}).get("run")
    if not throttle or not ledger:
        return None
    retry = stats.get("retry") or {}
    rate = throttle["rate_per_prefix"]
    return (f"{ledger.get('throttled', 0)} of the run's {sum(ledger['requests'].values())} "
            f"requests were answered 503 SlowDown (at most {float(rate):g} requests a second "
            f"per prefix, {throttle['prefixes']} prefixes used); botocore's "
            f"{retry.get('mode', '?')} retry mode resent {ledger['retries']} of them (at most "
            f"{retry.get('max_attempts', '?')} attempts a request) after "
            f"{float(ledger['retry_wait_ms']) / 1e3:.1f} s of backoff in all")


def print_lines(lines: list[str], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write("".join(line + "\n" for line in lines))
    out.flush()


def print_warnings(stats: dict[str, Any] | None, err: TextIO | None = None) -> None:
    """What the store reported about itself on open (``stats()["warnings"]``: damaged or
    missing segments, ...), one stderr line each, so damage is never only a counter."""
    err = err or sys.stderr
    for text in (stats or {}).get("warnings") or ():
        print(f"bench: warning: {text}", file=err)


def print_errors(phase: PhaseResult, err: TextIO | None = None) -> None:
    """The distinct error messages of a phase, on stderr, so a failing backend is visible."""
    err = err or sys.stderr
    for text, n in phase.errors.items():
        print(f"bench: {phase.name}: {n} op(s) failed: {text}", file=err)


def baseline_lines(baseline: Any) -> list[str]:
    """``[BASELINE]`` (the bare loop in Python) and ``[BASELINE-C]`` (in C, where built): each
    floor's throughput and runtime, and the run's throughput over it
    (:class:`experiments.core.baselines.Baseline`)."""
    def floor(tag: str, f: Any) -> list[str]:
        return [f"[{tag}], Throughput(ops/sec), {_num(float(f.phase.throughput))}",
                f"[{tag}], RunTime(ms), {int(round(f.phase.runtime_ms))}",
                f"[{tag}], Ratio, {_num(float(f.ratio))}"]

    lines = floor("BASELINE", baseline.python)
    lines += measurement_lines(baseline.python.phase.measurements, "BASELINE-")
    if baseline.native is not None:
        lines += floor("BASELINE-C", baseline.native)
    return lines


def clients_lines(lines: list[str], clients: int) -> list[str]:
    """YCSB's run lines with ``[OVERALL], Clients, N`` after the throughput line (a run whose
    clients were Spark tasks)."""
    at = next(i for i, line in enumerate(lines) if line.startswith("[OVERALL], Throughput")) + 1
    return lines[:at] + [f"[OVERALL], Clients, {clients}"] + lines[at:]
