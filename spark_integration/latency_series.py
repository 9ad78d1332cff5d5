"""End-to-end latency per second of a paced run, the backlog behind it, and recovery measured by it.

A paced run (``JobSpec.rate`` > 0) makes event ``i`` available at ``i / rate`` seconds after the
pacing started; the driver records every micro-batch's commit as a :class:`Commit`: the events
``[start, end)`` whose results it made final, and the instant it did so (seconds since the pacing
started).  An event's end-to-end latency is therefore ``done_s - i / rate``: from its creation to
the commit of its result at the sink, as CheckMate measures it (input timestamp to output
timestamp).  From the commits this module derives, with nothing else to go on:

* :func:`per_second` — p50 and p99 of the latency of the events *created* in each second of the
  run, as CheckMate's Figs 9-10 plot them (buckets by input time, so a failure shows where the
  events it delayed were born);
* :func:`backlog` — the events due but not yet committed at each commit: the queue in front of
  the job, which grows without bound when the rate is above what the job sustains;
* :func:`recovery_by_latency` — failure to the moment the sink is back at its normal latency:
  the events of the first second whose p50 is back within :data:`RECOVERY_TOLERANCE` of the
  pre-failure median, and stays there, reach the sink (CheckMate: recovery time is "failure
  detected to normal and stable execution", read off its p50 plot).

Invariants: a second's figures cover exactly the events created in it that some commit covered
(events are never counted twice: the driver gives each commit only the events it made final); the
latencies of one commit's events in one second are an arithmetic sequence, so a fixed number of
evenly spaced samples, each weighted by the events it stands for, gives their percentiles to within
one sample's spacing.  Pure functions of their arguments; no Spark.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

#: p50 within this fraction above its pre-failure median counts as back to normal
RECOVERY_TOLERANCE = 0.10
#: ... for this many consecutive seconds (or until the run ends): "normal and stable"
RECOVERY_HOLD_SECONDS = 3
#: samples per (commit, second) piece: the latencies in one piece are evenly spaced
SAMPLES = 32


@dataclass(frozen=True)
class Commit:
    """Events ``[start, end)`` committed ``done_s`` seconds after the pacing started."""

    start: int
    end: int
    done_s: float


def weighted_quantile(pairs: Iterable[tuple[float, float]], q: float) -> float:
    """The ``q`` quantile (0..1) of values given as ``(value, weight)`` pairs (0.0 for none): the
    smallest value whose cumulative weight reaches ``q`` of the total."""
    pairs = list(pairs)
    if not pairs:
        return 0.0
    values = np.array([v for v, _ in pairs], dtype=float)
    weights = np.array([w for _, w in pairs], dtype=float)
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][min(len(values) - 1, int(np.searchsorted(cum, q * cum[-1])))])


def _pieces(commit: Commit, rate: float, width: float) -> Iterable[tuple[int, list[tuple[float, float]]]]:
    """The commit's events cut by creation bucket: (bucket, [(latency ms, weight)])."""
    per_bucket = rate * width
    first = int(commit.start // per_bucket)
    last = int((commit.end - 1) // per_bucket)
    for b in range(first, last + 1):
        lo = max(commit.start, math.ceil(b * per_bucket))
        hi = min(commit.end, math.ceil((b + 1) * per_bucket))
        n = hi - lo
        if n <= 0:
            continue
        idx = np.linspace(lo, hi - 1, min(n, SAMPLES))
        lat = (commit.done_s - idx / rate) * 1e3
        yield b, [(float(v), n / len(idx)) for v in lat]


def per_second(commits: Sequence[Commit], rate: float, width: float = 1.0) -> list[dict]:
    """p50 and p99 latency (ms) of the events created in each ``width``-second bucket, in order:
    ``{"second", "events", "p50_ms", "p99_ms"}`` (``second`` is the bucket's start).  A bucket no
    commit covered is left out (the run ended, or failed, before its events were committed)."""
    if rate <= 0:
        return []
    buckets: dict[int, list[tuple[float, float]]] = {}
    for c in commits:
        for b, samples in _pieces(c, rate, width):
            buckets.setdefault(b, []).extend(samples)
    out = []
    for b in sorted(buckets):
        samples = buckets[b]
        out.append({"second": round(b * width, 3), "events": int(round(sum(w for _, w in samples))),
                    "p50_ms": round(weighted_quantile(samples, 0.5), 1),
                    "p99_ms": round(weighted_quantile(samples, 0.99), 1)})
    return out


def backlog(commits: Sequence[Commit], rate: float, events: int) -> list[tuple[float, float]]:
    """``(done_s, events due but not committed)`` at each commit: the events created by then
    (at most the input's ``events``) less the highest offset committed."""
    out, committed = [], 0
    for c in sorted(commits, key=lambda c: c.done_s):
        committed = max(committed, c.end)
        out.append((c.done_s, max(0.0, min(float(events), rate * c.done_s) - committed)))
    return out


def warmup_seconds(commits: Sequence[Commit], rate: float) -> float:
    """The creation time the first micro-batch's events reach: that batch starts the Python
    workers and carries the JVM's first compilation, so its seconds are not the normal level."""
    return commits[0].end / rate if commits and rate > 0 else 0.0


def recovery_by_latency(series: Sequence[dict], failure_s: float, normal_from: float = 0.0,
                        until_s: float | None = None, tolerance: float = RECOVERY_TOLERANCE,
                        hold: int = RECOVERY_HOLD_SECONDS) -> float | None:
    """Milliseconds from the failure (``failure_s`` seconds after the pacing started) until the
    sink is back at its normal latency, on the creation-time axis of ``series``.

    The normal level is the median p50 of the seconds (from ``normal_from`` on) whose events were
    normally committed before the failure: those created before ``failure_s`` less that latency
    (the events of the last latency before the failure were in flight, and the failure delays
    them).  From the first in-flight second on, the first second from which p50 stays within
    ``tolerance`` above the level for ``hold`` seconds (or to the end of the series) is the one
    whose events came out normally again; they reached the sink at its start plus the normal
    latency, and that instant less ``failure_s`` is the recovery (0 when it does not lie after the
    failure: the failure did not show at the sink).  Seconds from ``until_s`` on (the next
    failure) are not searched.  None when no second lies before the failure to take the level
    from, or p50 never got back."""
    width = series[1]["second"] - series[0]["second"] if len(series) > 1 else 1.0
    before = [s for s in series if normal_from <= s["second"] and s["second"] + width <= failure_s]
    if not before:
        return None
    rough = statistics.median(s["p50_ms"] for s in before) / 1e3
    settled = [s for s in before if s["second"] + width <= failure_s - rough] or before
    level = statistics.median(s["p50_ms"] for s in settled)
    cut = failure_s - level / 1e3  # events created from here on were in flight at the failure
    after = [s for s in series if s["second"] + width > cut and (until_s is None or s["second"] < until_s)]
    for i, s in enumerate(after):
        window = after[i:i + hold]
        if all(w["p50_ms"] <= (1.0 + tolerance) * level for w in window) \
                and (len(window) == hold or i + len(window) == len(after)):
            if until_s is not None and len(window) < hold:
                return None  # cut short by the next failure: not shown to be stable
            return round(max(0.0, s["second"] + level / 1e3 - failure_s) * 1e3, 1)
    return None
