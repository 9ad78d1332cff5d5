"""``bench mst``: a protocol's maximum sustainable throughput (MST) on a query and a backend.

CheckMate reports each protocol's MST — "the maximum throughput that the system can handle for a
long period of time without provoking backpressure", which shows as "constantly increasing
latencies and an average processing throughput lower than the rate of incoming messages" — and
runs its experiments at 80 % of it.  Its authors searched the rate by hand; this searches it.

**A probe** runs the job paced at one rate for :attr:`Sizes.probe_seconds` of input (``rate x
probe_seconds`` events, no failure, micro-batches as large as the backlog) and looks at the
*window*: the seconds of input after :attr:`Sizes.warmup_seconds`.  Over the window it fits, by
least squares,

  * the **backlog** right after each commit (events due but not yet committed,
    :func:`spark_integration.latency_series.backlog`) against the commit's time, and
  * the **p99 latency** of each second's events against the second
    (:func:`spark_integration.latency_series.per_second`).

A job that keeps pace commits, batch after batch, what arrived during the previous batch, so the
backlog after a commit stays level; a job that does not falls further behind every second.  The
probe is **unsustainable** when the backlog grows faster than :attr:`Criterion.growth` of the rate
(the job processes less than ``1 - growth`` of its input) or the p99 latency grows faster than
``growth`` seconds per second (the same shortfall seen at the sink) — and that growth adds up to
more than :attr:`Criterion.min_lag_s` over the window (a job less than a second further behind at
its end is within the sawtooth of its micro-batches) — or when fewer than
:attr:`Criterion.min_commits` commits fall in the window (micro-batches longer than a third of
the window show no trend; near its capacity a micro-batch engine's batches grow long, so the MST
found is the highest rate whose batches stay that short), or when the job does not finish within
:attr:`Sizes.timeout_factor` times its input's duration.  The verdict names what stopped it.

**The search** (:func:`search`, pure: it is given the probe as a function) starts at
``start_rate``, doubles the rate while probes are sustainable (halves it while they are not) until
one sustainable and one unsustainable rate bracket the MST, then bisects the bracket
geometrically until its ends are within ``precision`` of each other or ``max_probes`` probes ran.
The MST is the highest sustainable rate probed.  Every probe is kept in the document.

**Paired probes** (:func:`pair`) answer what one search per protocol cannot: whether two
protocols' MSTs differ by less than the search's precision.  Each protocol is probed at the same
rates (the ends of both searches' brackets, :func:`bracket_rates`), in turn, for several rounds,
and a protocol sustains a rate when most of its rounds there were sustainable
(:meth:`Pairing.mst`).

Read the result with its method: one probe per rate (a noisy minute of the shared machine can
turn one verdict), and a probe near the MST may still be converging from its first micro-batch
when its window starts (a job at 95 % of its capacity shortens its micro-batches slowly), so the
search errs low.  A 20 s probe has a 15 s window, above the 10 s a run needs to be compared with
``none`` at all; ``--quick``'s 10 s probes are smoke runs.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from spark_integration.errors import SparkIntegrationError
from spark_integration.job import JobSpec
from spark_integration.latency_series import Commit, backlog, per_second

from experiments.core.document import Document, Environment

SCHEMA = "ckptbench.mst/1"
SUSTAINABLE, UNSUSTAINABLE = "sustainable", "unsustainable"
#: a probe whose job failed for a reason that is no verdict (Spark lost a Python worker), twice
FAILED = "failed"
#: attempts at a probe whose job fails that way: the second runs on the same session
ATTEMPTS = 2


@dataclass(frozen=True)
class Sizes:
    """How long each probe runs and how far the search goes."""

    probe_seconds: float  # input per probe, in seconds at the probed rate
    warmup_seconds: float  # the first seconds of each probe, left out of the window
    start_rate: float  # events/s of the first probe
    precision: float  # stop bisecting when high / low <= 1 + precision
    max_probes: int
    keys: int
    timeout_factor: float = 6.0  # a probe not done after this many times its input's duration: unsustainable

    @property
    def window_seconds(self) -> float:
        return self.probe_seconds - self.warmup_seconds


#: the default search: 20 s probes (a 15 s window), bracket to 10 %, at most 10 probes (several minutes)
FULL = Sizes(probe_seconds=20.0, warmup_seconds=5.0, start_rate=1000.0, precision=0.10, max_probes=10,
             keys=10_000)
#: ``--quick``: 10 s probes (a 7 s window: a smoke run), bracket to 25 %, at most 7 probes
QUICK = Sizes(probe_seconds=10.0, warmup_seconds=3.0, start_rate=1000.0, precision=0.25, max_probes=7,
              keys=1_000)


@dataclass(frozen=True)
class Criterion:
    """When a probe's window shows growth without bound."""

    #: backlog growth above this fraction of the rate (events/s per s), or p99 growth above this
    #: many seconds per second, is not sustainable
    growth: float = 0.05
    #: a window with fewer commits than this shows no trend: its micro-batches take more than a
    #: third of it (near its capacity a micro-batch engine's batches, and latency, grow long), and
    #: the probe counts as unsustainable at its size
    min_commits: int = 3
    #: ... and the growth must add up, over the window, to more than this many seconds of input
    #: (backlog) or of latency (p99): a job that falls less than a second behind in the window is
    #: within the noise of its micro-batches' sawtooth on a shared machine
    min_lag_s: float = 1.0


@dataclass
class Probe:
    """One paced run at ``rate`` and what its window showed."""

    rate: float
    verdict: str  # SUSTAINABLE, UNSUSTAINABLE or FAILED
    stopped_by: str = ""  # what made it unsustainable: backlog, p99, commits, timeout (FAILED: the error)
    backlog_slope: float | None = None  # events/s per s, over the window
    p99_slope_ms_s: float | None = None  # ms per s, over the window
    p50_ms: float | None = None  # median of the window's per-second p50
    p99_ms: float | None = None  # the window's worst per-second p99
    commits_in_window: int = 0
    window_s: float = 0.0  # the window's length: the input after the warm-up seconds
    throughput: float | None = None  # events committed per second over the whole probe
    seconds: float = 0.0  # the probe's wall time
    per_second: list[dict[str, Any]] = field(default_factory=list)

    @property
    def sustainable(self) -> bool:
        return self.verdict == SUSTAINABLE


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(x, y)`` points (None for fewer than two distinct x)."""
    if len(points) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def judge(rate: float, commits: Sequence[Commit], events: int, warmup_s: float,
          criterion: Criterion = Criterion()) -> Probe:
    """The verdict on a probe at ``rate`` whose micro-batches committed ``commits`` (seconds since
    the pacing started) of ``events`` events, with the window from ``warmup_s`` to the end of its
    input (``events / rate``)."""
    end_s = events / rate
    series = per_second(commits, rate)
    window = [s for s in series if warmup_s <= s["second"] < end_s]
    after = [(t, b) for t, b in backlog(commits, rate, events) if warmup_s <= t <= end_s]
    b_slope = slope(after)
    p_slope = slope([(s["second"], s["p99_ms"]) for s in window])
    probe = Probe(rate=rate, verdict=SUSTAINABLE, backlog_slope=_round(b_slope), p99_slope_ms_s=_round(p_slope),
                  p50_ms=round(statistics.median(s["p50_ms"] for s in window), 1) if window else None,
                  p99_ms=max((s["p99_ms"] for s in window), default=None), commits_in_window=len(after),
                  window_s=round(end_s - warmup_s, 3), per_second=series)
    if commits:
        last = max(c.done_s for c in commits)
        probe.throughput = round(max(c.end for c in commits) / last, 1) if last > 0 else None
    span = end_s - warmup_s
    if len(after) < criterion.min_commits:
        probe.verdict, probe.stopped_by = UNSUSTAINABLE, "commits"
    elif b_slope is not None and b_slope > rate * limit(criterion, span):
        probe.verdict, probe.stopped_by = UNSUSTAINABLE, "backlog"
    elif p_slope is not None and p_slope > 1e3 * limit(criterion, span):
        probe.verdict, probe.stopped_by = UNSUSTAINABLE, "p99"
    return probe


def limit(criterion: Criterion, window_s: float) -> float:
    """The growth (a fraction of the rate per second, or seconds of latency per second) above
    which a window of ``window_s`` seconds is unsustainable."""
    return max(criterion.growth, criterion.min_lag_s / window_s)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def why(probe: Probe, criterion: Criterion) -> str:
    """The criterion that made ``probe`` unsustainable, in words ("" when it was sustainable)."""
    grow = limit(criterion, probe.window_s) if probe.window_s else criterion.growth
    if probe.stopped_by == "backlog":
        return (f"backlog grew {probe.backlog_slope:,.0f} events/s per s (> {grow * probe.rate:,.0f}: "
                f"{grow:.0%} of the rate)")
    if probe.stopped_by == "p99":
        return f"p99 latency grew {probe.p99_slope_ms_s:,.0f} ms per s (> {grow * 1e3:,.0f})"
    if probe.stopped_by == "commits":
        return (f"{probe.commits_in_window} micro-batch commits in the window "
                f"(< {criterion.min_commits}: micro-batches longer than a third of the window)")
    if probe.stopped_by == "timeout":
        return "the probe did not finish its input in time"
    return ""


@dataclass
class Search:
    """The probes in the order they ran, the MST (None: no probed rate was sustainable) and why
    the search stopped."""

    probes: list[Probe]
    mst: float | None
    low: float | None  # the bracket: highest sustainable and lowest unsustainable rate probed
    high: float | None
    stop: str


def search(probe: Callable[[float], Probe], start_rate: float, precision: float, max_probes: int,
           max_rate: float = 1e7, min_rate: float = 10.0) -> Search:
    """Ramp by doubling (or halving) from ``start_rate`` until a sustainable and an unsustainable
    rate bracket the MST, then bisect geometrically until ``high / low <= 1 + precision``."""
    probes: list[Probe] = []
    low: float | None = None
    high: float | None = None

    def run(rate: float) -> Probe:
        p = probe(rate)
        probes.append(p)
        return p

    def failed(p: Probe) -> Search:
        return Search(probes, low, low, high, f"the probe at {p.rate:,.0f} events/s failed {ATTEMPTS} times "
                                              f"({p.stopped_by}); the search ends with what it found")

    rate = start_rate
    while low is None or high is None:
        if len(probes) >= max_probes:
            return Search(probes, low, low, high, f"{max_probes} probes before the MST was bracketed")
        p = run(rate)
        if p.verdict == FAILED:
            return failed(p)
        if p.sustainable:
            low = rate if low is None else max(low, rate)
            if high is None:
                if rate >= max_rate:
                    return Search(probes, low, low, None, f"sustainable at the highest rate tried ({max_rate:,.0f})")
                rate = min(rate * 2, max_rate)
        else:
            high = rate if high is None else min(high, rate)
            if low is None:
                if rate / 2 < min_rate:
                    return Search(probes, None, None, high, f"unsustainable down to {rate:,.0f} events/s")
                rate = rate / 2
    while high / low > 1 + precision:
        if len(probes) >= max_probes:
            return Search(probes, low, low, high, f"{max_probes} probes: bracket {low:,.0f}-{high:,.0f} "
                                                  f"wider than {precision:.0%}")
        rate = float(round(math.sqrt(low * high)))
        if rate in (low, high):
            break
        p = run(rate)
        if p.verdict == FAILED:
            return failed(p)
        if p.sustainable:
            low = rate
        else:
            high = rate
    return Search(probes, low, low, high, f"bracket {low:,.0f}-{high:,.0f} within {precision:.0%}")


# ---------------------------------------------------------------------------------- paired probes
@dataclass
class Pairing:
    """Protocols probed in turn at the same rates, ``rounds`` times (:func:`pair`): each
    protocol's probes in the order they ran."""

    rates: list[float]
    rounds: int
    probes: dict[str, list[Probe]] = field(default_factory=dict)

    def at(self, protocol: str, rate: float) -> list[Probe]:
        return [p for p in self.probes.get(protocol, []) if p.rate == rate]

    def held(self, protocol: str, rate: float) -> tuple[int, int]:
        """(sustainable probes, probes with a verdict) of ``protocol`` at ``rate``: a FAILED
        probe (Spark lost a worker) is no verdict either way."""
        judged = [p for p in self.at(protocol, rate) if p.verdict != FAILED]
        return sum(p.sustainable for p in judged), len(judged)

    def sustains(self, protocol: str, rate: float) -> bool:
        """Whether most of the probes with a verdict at ``rate`` were sustainable."""
        ok, judged = self.held(protocol, rate)
        return 2 * ok > judged

    def mst(self, protocol: str) -> float | None:
        """The highest rate ``protocol`` sustains in most rounds, with every lower rate too
        (None: not even the lowest)."""
        found = None
        for rate in sorted(self.rates):
            if not self.sustains(protocol, rate):
                break
            found = rate
        return found

    def median_backlog(self, protocol: str, rate: float) -> float | None:
        """The median over the rounds of the backlog's growth at ``rate``, as a fraction of the
        rate per second (0: level; 0.05: 5 % of the input left behind every second)."""
        slopes = [p.backlog_slope for p in self.at(protocol, rate) if p.backlog_slope is not None]
        return statistics.median(slopes) / rate if slopes else None


def pair(probe: Callable[[str, float], Probe], protocols: Sequence[str], rates: Sequence[float],
         rounds: int) -> Pairing:
    """Every protocol probed at every rate, ``rounds`` times: round after round, rate after rate
    (lowest first), the protocols in turn with the first one changing from rate to rate and round
    to round, so that a drift of the machine or of the JVM over the run (a JIT still compiling,
    another tenant's load) falls on each protocol alike.  One search per protocol probes each
    rate once and one protocol after the other; a difference smaller than the search's precision
    needs the protocols side by side, several times."""
    out = Pairing(rates=sorted(set(rates)), rounds=rounds, probes={p: [] for p in protocols})
    turn = 0
    for _ in range(rounds):
        for rate in out.rates:
            k = turn % len(protocols)
            for protocol in list(protocols[k:]) + list(protocols[:k]):
                out.probes[protocol].append(probe(protocol, rate))
            turn += 1
    return out


def bracket_rates(searches: Sequence[Search]) -> list[float]:
    """The rates at which to pair protocols whose searches are ``searches``: each search's
    bracket ends (the highest sustainable and the lowest unsustainable rate it probed), so the
    pairing re-asks, side by side, exactly the questions the searches answered apart."""
    return sorted({r for s in searches for r in (s.low, s.high) if r})


# ---------------------------------------------------------------------------------- real probes
def probe_job(spark: Any, tmp: str, protocol: str, backend: str | None, base: JobSpec, rate: float,
              sizes: Sizes, interval: int, criterion: Criterion = Criterion()) -> Probe:
    """One real probe: ``base``'s job paced at ``rate`` for ``sizes.probe_seconds`` of input,
    judged by ``criterion``."""
    from experiments.spark.matrix import run_one

    events = max(1, int(rate * sizes.probe_seconds))
    spec = replace(base, events=events, rate=rate, max_batch=events, verify=False,
                   timeout=sizes.timeout_factor * sizes.probe_seconds + 60)
    t = time.monotonic()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            raw = run_one(spark, protocol, backend, spec, [], interval, tmp)
            break
        except SparkIntegrationError as exc:
            # a probe that outlasts its timeout is behind its input: that is a verdict; Spark
            # failing under it (a worker that did not start on a loaded machine) is not: again,
            # then a failed probe that ends the search with what it found
            seconds = round(time.monotonic() - t, 1)
            if "did not finish within" in str(exc):
                return Probe(rate=rate, verdict=UNSUSTAINABLE, stopped_by="timeout", seconds=seconds)
            if attempt == ATTEMPTS:
                return Probe(rate=rate, verdict=FAILED, stopped_by=str(exc).splitlines()[0][:300], seconds=seconds)
    commits = [Commit(*c) for c in raw["latency"]["commits"]]
    probe = judge(rate, commits, events, sizes.warmup_seconds, criterion)
    probe.seconds = round(time.monotonic() - t, 1)
    return probe


@dataclass(kw_only=True)
class Mst(Document):
    """``ckptbench.mst/1``: one protocol's MST search on one query and backend: every probe."""

    SCHEMA = SCHEMA

    quick: bool
    job: str
    protocol: str
    backend: str
    parallelism: int
    interval: int
    sizes: Sizes
    criterion: Criterion
    mst: float | None
    low: float | None
    high: float | None
    stop: str
    probes: list[Probe] = field(default_factory=list)
    seconds: float = 0.0
    environment: Environment = field(default_factory=Environment.here)


def _saying(spark: Any, tmp: str, backend: str | None, base: JobSpec, sizes: Sizes, interval: int,
            criterion: Criterion, say: Callable[[str], None],
            named: bool) -> Callable[[str, float], Probe]:
    """A real probe of ``base``'s job on ``spark`` that says its line as it ends, numbered in the
    order run; ``named``: the line names the protocol (probes of several are interleaved)."""
    count = 0

    def one(protocol: str, rate: float) -> Probe:
        nonlocal count
        p = probe_job(spark, tmp, protocol, backend, base, rate, sizes, interval, criterion)
        count += 1
        say(probe_line(count, p, criterion, protocol if named else ""))
        return p
    return one


def find(spark: Any, tmp: str, protocol: str, backend: str | None, base: JobSpec, sizes: Sizes,
         interval: int = 1, criterion: Criterion = Criterion(),
         say: Callable[[str], None] = print) -> Search:
    """:func:`search` with real probes of ``base``'s job on ``spark``; each probe said as it ends."""
    probe = _saying(spark, tmp, backend, base, sizes, interval, criterion, say, named=False)
    return search(lambda rate: probe(protocol, rate), sizes.start_rate, sizes.precision, sizes.max_probes)


def find_paired(spark: Any, tmp: str, protocols: Sequence[str], backend: str | None, base: JobSpec,
                sizes: Sizes, rates: Sequence[float], rounds: int, interval: int = 1,
                criterion: Criterion = Criterion(), say: Callable[[str], None] = print) -> Pairing:
    """:func:`pair` with real probes of ``base``'s job on ``spark``; each probe said as it ends."""
    return pair(_saying(spark, tmp, backend, base, sizes, interval, criterion, say, named=True),
                protocols, rates, rounds)


def run(job: str, kind: str, protocol: str, backend: str | None, quick: bool = False, parallelism: int = 2,
        interval: int = 1, master: str = "local[2]", sizes: Sizes | None = None,
        say: Callable[[str], None] = print) -> Mst:
    """The search on a session of its own, after one warm-up run of the job (the JVM compiles
    Spark's paths during its first runs: the first probe would look slower); the document."""
    from experiments.spark.matrix import run_one
    from experiments.spark.session import spark_run

    sizes = sizes or (QUICK if quick else FULL)
    criterion = Criterion()
    base = JobSpec(kind=kind, keys=sizes.keys, skew=0.0, parallelism=parallelism)  # uniform, as CheckMate's MST
    with spark_run(master, [protocol], "ckptbench-mst-") as session:
        warm = int(sizes.start_rate * sizes.warmup_seconds)
        run_one(session.spark, protocol, backend, replace(base, events=warm, max_batch=warm), [], interval,
                session.tmp)
        found = find(session.spark, session.tmp, protocol, backend, base, sizes, interval, criterion, say)
    return Mst(quick=quick, job=job, protocol=protocol, backend=backend or "-", parallelism=parallelism,
               interval=interval, sizes=sizes, criterion=criterion, mst=found.mst, low=found.low,
               high=found.high, stop=found.stop, probes=found.probes, seconds=session.seconds())


# ---------------------------------------------------------------------------------- lines
def probe_line(n: int, p: Probe, criterion: Criterion, protocol: str = "") -> str:
    """``[MST], Probe, ...``: one probe's rate (of ``protocol``, when probes of several are
    interleaved), verdict, slopes and latency."""
    fmt = lambda v, spec: "–" if v is None else format(v, spec)  # noqa: E731
    reason = "" if p.sustainable else f" ({p.stopped_by})" if p.verdict == FAILED else f" ({why(p, criterion)})"
    return (f"[MST], Probe {n}{f' ({protocol})' if protocol else ''}, rate {p.rate:,.0f} events/s, {p.verdict}{reason}, backlog slope "
            f"{fmt(p.backlog_slope, '+,.0f')} events/s per s, p99 slope {fmt(p.p99_slope_ms_s, '+,.0f')} ms/s, "
            f"p50 {fmt(p.p50_ms, ',.0f')} ms, p99 {fmt(p.p99_ms, ',.0f')} ms, "
            f"{p.commits_in_window} commits in window, {p.seconds:.1f} s")


def summary_lines(doc: Mst) -> list[str]:
    """``[MST]`` lines: the rate found, the criterion that stopped the search above it, the method."""
    stopper = next((p for p in doc.probes if not p.sustainable and p.rate == doc.high), None)
    out = [f"[MST], Job, {doc.job}", f"[MST], Protocol, {doc.protocol}", f"[MST], Backend, {doc.backend}",
           f"[MST], Rate(events/sec), {'none sustainable' if doc.mst is None else f'{doc.mst:.0f}'}",
           f"[MST], Search, {doc.stop}"]
    if stopper is not None:
        out.append(f"[MST], StoppedBy, {stopper.rate:,.0f} events/s: {why(stopper, doc.criterion)}")
    out += [f"[MST], Probes, {len(doc.probes)}",
            f"[MST], ProbeSeconds, {doc.sizes.probe_seconds:g} (window {doc.sizes.window_seconds:g} s after "
            f"{doc.sizes.warmup_seconds:g} s)" + (" — --quick: a smoke run" if doc.quick else ""),
            f"[MST], Seconds, {doc.seconds}"]
    if doc.environment.loadavg:  # a shared machine's load moves the verdicts: said beside them
        out.append("[MST], LoadAverage(1/5/15 min), " + " ".join(f"{x:.2f}" for x in doc.environment.loadavg))
    return out
