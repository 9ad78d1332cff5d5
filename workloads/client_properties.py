"""YCSB's client-side properties (``site.ycsb.Client`` and ``Measurements``): which ones
ckptbench honours, how, and a warning for each one YCSB acts on that ckptbench does not.

Honoured here:

- ``workload``: only YCSB's ``CoreWorkload`` (under either package name) is implemented; any
  other class is refused, since running CoreWorkload instead would measure the wrong thing.
- ``maxexecutiontime`` (seconds, YCSB's default 0 = no limit): the run phase stops after it
  and reports what it did, as YCSB's TerminatorThread stops the clients.
- ``measurement.interval`` (``op`` default, ``intended``, ``both``): which latencies are printed.
  ``op`` prints the service latency only; ``intended`` prints the latency from the intended
  start under the operation's own name (``[READ]``), as YCSB names it then; ``both`` prints
  both, the intended one under ``[Intended-READ]``.  The measurements themselves are not
  changed (a result document keeps both), only the sections printed.
- ``measurementtype``: ``hdrhistogram`` (default) or ``timeseries`` (with
  ``timeseries.granularity`` in ms, default 1000); YCSB's other types are printed as
  hdrhistogram, with a warning.

Binding properties (names with a dot the core does not read, ``redis.host`` say) are ignored
quietly, as YCSB ignores the ones no component reads.
"""

from __future__ import annotations

from typing import Callable

from .core import WorkloadError
from .measure import Measurements

INTERVALS = ("op", "intended", "both")
MEASUREMENT_TYPES = ("hdrhistogram", "timeseries")
#: YCSB's measurement types printed as hdrhistogram (with a warning)
OTHER_MEASUREMENT_TYPES = ("histogram", "hdrhistogram+histogram", "hdrhistogram+raw", "raw")
INTENDED = "Intended-"

#: names YCSB's core acts on that ckptbench does not, and what ckptbench does instead
NOT_HONOURED: dict[str, str] = {
    "label": "status lines carry no label",
    "table": "every store has one namespace (no table)",
    "dotransactions": "the phase is the command: bench load or bench run",
    "measurement.trackjvm": "no JVM to track",
    "measurement.raw.output_file": "no raw measurements; see measurementtype",
    "measurement.raw.no_summary": "no raw measurements; see measurementtype",
    "histogram.buckets": "latencies are HdrHistograms",
    "fieldlengthhistogram": "fieldlengthdistribution=histogram is not implemented",
    "readallfieldsbyname": "reads read the record, not fields by name",
    "core_workload_insertion_retry_limit": "a failed insert is counted, not retried",
    "core_workload_insertion_retry_interval": "a failed insert is counted, not retried",
    "core_workload_insertion_keep_going_on_error": "a failed insert is counted, not retried",
    "reportlatencyforeacherror": "failed operations go to <OP>-FAILED",
    "latencytrackederrors": "failed operations go to <OP>-FAILED",
}


def check_workload(props: dict[str, str]) -> None:
    """``workload=``: YCSB's CoreWorkload or nothing else (see the module docstring)."""
    name = props.get("workload", "site.ycsb.workloads.CoreWorkload").strip()
    if name.rsplit(".", 1)[-1] != "CoreWorkload":
        raise WorkloadError(f"workload={name!r} is not available: ckptbench implements YCSB's "
                            "CoreWorkload only (workload=site.ycsb.workloads.CoreWorkload)")


def max_execution_time(props: dict[str, str]) -> float | None:
    """``maxexecutiontime`` in seconds, or None for no limit (YCSB's 0)."""
    text = props.get("maxexecutiontime", "0").strip()
    try:
        seconds = int(text)  # YCSB: Integer.parseInt
    except ValueError:
        raise WorkloadError(f"maxexecutiontime={text!r} is not whole seconds "
                            "(e.g. -p maxexecutiontime=60)") from None
    if seconds < 0:
        raise WorkloadError(f"maxexecutiontime must be >= 0 seconds (got {seconds})")
    return float(seconds) if seconds else None


def measurement_interval(props: dict[str, str]) -> str:
    """``measurement.interval``: op, intended or both."""
    mode = props.get("measurement.interval", "op").strip()
    if mode not in INTERVALS:
        raise WorkloadError(f"measurement.interval={mode!r}: give one of {', '.join(INTERVALS)}")
    return mode


def measurement_type(props: dict[str, str], warn: Callable[[str], None]) -> str:
    """``measurementtype``: hdrhistogram or timeseries; YCSB's others warn and mean
    hdrhistogram; a name YCSB does not know either is an error."""
    kind = props.get("measurementtype", "hdrhistogram").strip()
    if kind in MEASUREMENT_TYPES:
        return kind
    if kind in OTHER_MEASUREMENT_TYPES:
        warn(f"measurementtype={kind} is not implemented; printing hdrhistogram")
        return "hdrhistogram"
    raise WorkloadError(f"measurementtype={kind!r}: give hdrhistogram or timeseries")


def granularity_ms(props: dict[str, str]) -> int:
    """``timeseries.granularity``: the time series' bucket width in ms (YCSB's default 1000)."""
    text = props.get("timeseries.granularity", "1000").strip()
    try:
        ms = int(text)
    except ValueError:
        ms = 0
    if ms <= 0:
        raise WorkloadError(f"timeseries.granularity={text!r}: give whole milliseconds > 0")
    return ms


def select_interval(measurements: Measurements, mode: str) -> Measurements:
    """The measurements to print under ``measurement.interval=mode`` (module docstring).
    With ``intended`` an operation without an intended latency (no target rate) keeps its own,
    as YCSB's intended start is the real start then."""
    out = Measurements()
    for name, hist in measurements.histograms.items():
        intended = name.startswith(INTENDED)
        if mode == "both" or (mode == "op" and not intended):
            out.histograms[name] = hist
        elif mode == "intended":
            if intended:
                out.histograms[name.removeprefix(INTENDED)] = hist
            elif INTENDED + name not in measurements.histograms:
                out.histograms[name] = hist
    out.statuses.update(measurements.statuses)
    return out


def warnings(props: dict[str, str]) -> list[str]:
    """One line per property YCSB would act on that this run ignores."""
    out = [f"property {name} is not honoured: {why}" for name, why in NOT_HONOURED.items()
           if name in props]
    if props.get("measurementtype", "").strip() != "timeseries" \
            and "timeseries.granularity" in props:
        out.append("property timeseries.granularity is not honoured: it needs "
                   "measurementtype=timeseries")
    return out
