"""Several backends, or several points of one, under identical settings: ``compare`` and ``sweep``.

Every backend gets a fresh store, the same workload, seed and client settings
(:func:`run_workload`).  A backend that cannot open (server down, client package missing) comes
back *skipped* with the reason: a comparison reports it, never drops it silently.

The comparison method, for a noisy shared machine: :func:`sweep` with ``rounds`` > 1 runs the
whole sweep that many times with the backends interleaved within each round, so a slow minute
hits every backend alike; the ratios it is run for (most threads over fewest, first backend over
the others) are computed per round and reported as their median with every round's value
(:func:`experiments.core.results.sweep_ratios`).  :func:`median_spread` is that summary for any list
of per-round values.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from backends import BackendUnavailableError, CkptError, backend_class
from workloads import core, runner
from workloads.core import WorkloadSpec
from workloads.runner import ClientSettings, PhaseResult

from experiments.core import results
from experiments.core.run import data_dir
from experiments.core.spec import ProgressFactory, SpecError, no_progress, with_bar

#: a sweep stops after this many consecutive points gaining less than MIN_GAIN throughput
FLAT_POINTS = 2
MIN_GAIN = 0.05


@dataclass
class Outcome:
    """One backend's run: its phases, or why it was skipped."""

    backend: str
    phases: dict[str, PhaseResult] = field(default_factory=dict)
    skipped: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: the store's own statistics after the run (the durability it really used among them)
    backend_stats: dict[str, Any] | None = None

    @property
    def run(self) -> PhaseResult:
        return self.phases["run"]


def median_spread(values: list[float]) -> dict[str, Any]:
    """The median of per-round values, their range, and the values themselves."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "rounds": list(values)}


def options_for(backend: str, options: dict[str, Any], shared: bool = False) -> dict[str, Any]:
    """The subset of ``options`` that ``backend`` declares (all of them when its class cannot
    be loaded: the run then reports it as skipped).  ``shared``: several backends run with these
    options, so a ``path`` given once becomes one sub-directory per backend (``PATH/<backend>``;
    a store directory belongs to one backend, which refuses another's)."""
    try:
        names = set(backend_class(backend).all_options())
    except CkptError:
        return dict(options)
    mine = {k: v for k, v in options.items() if k in names}
    if shared and mine.get("path"):
        base, q, query = str(mine["path"]).partition("?")
        mine["path"] = f"{base.rstrip('/')}/{backend}{q}{query}"
    return mine


def check_options(backends: list[str], options: dict[str, Any]) -> None:
    """Every backend's share of ``options`` parses, before any backend runs (a typo fails
    first); an unknown backend name fails too, a missing client package does not."""
    from backends import UnknownBackendError

    for backend in backends:
        try:
            cls = backend_class(backend)
        except UnknownBackendError:
            raise
        except CkptError:
            continue
        cls.parse_options(options_for(backend, options))


def run_workload(backend: str, options: dict[str, Any], spec: WorkloadSpec,
                 clients: ClientSettings = ClientSettings(), *,
                 progress: ProgressFactory = no_progress) -> Outcome:
    """Load and run ``spec`` on a fresh store of ``backend``; skipped (with the reason) if it
    cannot open.  ``options`` is copied, so one dict serves many backends.  ``progress``
    gets a ``<backend> load`` and a ``<backend> run`` bar."""
    options = dict(options)
    try:
        cls = backend_class(backend)
        with data_dir(cls, options):
            store = cls(**options)
            try:
                workload = core.CoreWorkload(spec, seed=clients.seed)
                phases = {"load": with_bar(progress, f"{backend} load", spec.inserts(), lambda update:
                                           runner.load(store, workload, batch=clients.load_batch,
                                                       progress=update))}
                loaded = store.requests()  # the open's and the load's: the run's are the rest
                ops = clients.operations if clients.duration else clients.operations or spec.operations
                phases["run"] = with_bar(progress, f"{backend} run", ops,
                                         lambda update: runner.run(store, workload, clients,
                                                                   progress=update))
                ran = store.requests().since(loaded)  # before stats(), which asks a server too
                stats = store.stats()
                stats["ledger_by_phase"] = {"load": loaded.as_dict(), "run": ran.as_dict()}
            finally:
                store.close()
    except (BackendUnavailableError, ImportError, ConnectionError, OSError) as exc:
        return Outcome(backend, skipped=f"{type(exc).__name__}: {exc}".strip())
    except CkptError as exc:
        if isinstance(exc, ValueError):  # unknown backend / bad option: the user's mistake
            raise
        return Outcome(backend, skipped=f"{type(exc).__name__}: {exc}")
    return Outcome(backend, phases, backend_stats=stats)


def compare(backends: list[str], options: dict[str, Any], spec: WorkloadSpec,
            clients: ClientSettings, *, config: dict[str, Any], rounds: int = 1, warmup: bool = True,
            on_result: Callable[[int, Outcome], None] | None = None,
            progress: ProgressFactory = no_progress) -> results.Compare:
    """Each backend with identical settings; the ``ckptbench.compare/1`` document.  With
    ``warmup`` every backend first runs once, a tenth of the operations, unmeasured: the first
    run of a process pays for imports, the page cache and a server's connections, which once
    made a store's first run several times slower than its next.  With ``rounds`` > 1 every
    backend runs that many times, interleaved, the order reversed every other round (no backend
    always runs first); each entry is the backend's run of median throughput, with every
    round's throughput, and ``ratios`` holds the first backend's throughput over each other's
    per round and their median (:func:`compare_ratios`).  ``progress`` gets one outer bar
    counting the runs (warm-ups and rounds) and each run's load and run bars inside it."""
    if rounds < 1:
        raise SpecError("--rounds must be >= 1")
    check_options(backends, options)
    runs: dict[str, list[Outcome]] = {b: [] for b in backends}
    total = len(backends) * (rounds + bool(warmup))
    label = "compare" + (f", {rounds} rounds" if rounds > 1 else "")

    def every_run(update: Callable[[int], None]) -> None:
        done = 0
        if warmup:
            short = replace(clients, operations=max(100, (clients.operations or spec.operations) // 10),
                            duration=None, target=None)
            small = replace(spec, records=max(100, spec.records // 10), insert_start=0,
                            insert_count=None)
            for backend in backends:
                run_workload(backend, options_for(backend, options, len(backends) > 1), small,
                             short, progress=_labelled(progress, "warm-up "))
                done += 1
                update(done)
        for r in range(rounds):
            for backend in (backends if r % 2 == 0 else backends[::-1]):
                outcome = run_workload(backend, options_for(backend, options, len(backends) > 1),
                                       spec, clients, progress=_labelled(
                                           progress, f"round {r + 1} " if rounds > 1 else ""))
                if on_result is not None:
                    on_result(r, outcome)
                runs[backend].append(outcome)
                done += 1
                update(done)

    with_bar(progress, label, total, every_run)
    return results.Compare(
        workload=spec.name, config={**config, "workload_spec": spec.to_dict(), "rounds": rounds},
        results=[_median_run(runs[b]) for b in backends],
        ratios=compare_ratios(backends, runs) if rounds > 1 else None, warmup=warmup)


def _labelled(progress: ProgressFactory, prefix: str) -> ProgressFactory:
    """``progress`` with ``prefix`` before every label (``round 2 redis run``)."""
    return lambda label, total: progress(prefix + label, total)


def _median_run(outcomes: list[Outcome]) -> results.Entry:
    """A backend's entry over its rounds: skipped if any round was, else its run of median
    throughput (the lower of the middle two for an even count) with every round's."""
    skipped = [o for o in outcomes if o.skipped]
    if skipped:
        return results.entry(skipped[0])
    ranked = sorted(outcomes, key=lambda o: o.run.throughput)
    entry = results.entry(ranked[(len(ranked) - 1) // 2])
    if len(outcomes) > 1:
        entry.rounds_ops_sec = [o.run.throughput for o in outcomes]
    return entry


def compare_ratios(backends: list[str], runs: dict[str, list[Outcome]]) -> list[results.Ratio]:
    """The first backend's throughput over each other backend's (``over``), per round, as their
    median (:func:`median_spread`), for backends that ran in every round."""
    first = runs[backends[0]]
    if any(o.skipped for o in first):
        return []
    out = []
    for b in backends[1:]:
        if any(o.skipped or not o.run.throughput for o in runs[b]):
            continue
        per_round = [a.run.throughput / o.run.throughput for a, o in zip(first, runs[b])]
        out.append(results.Ratio(f"{backends[0]} / {b}", over=b, **median_spread(per_round)))
    return out


def sweep_points(backend: str, options: dict[str, Any], spec: WorkloadSpec, *,
                 targets: list[float] | None = None, threads_list: list[int] | None = None,
                 point_seconds: float = 3.0, max_points: int = 12,
                 clients: ClientSettings = ClientSettings(),
                 on_point: Callable[[Outcome], None] | None = None,
                 progress: ProgressFactory = no_progress) -> list[Outcome]:
    """Raise the target rate (or the thread count) of one backend until throughput stops growing.

    ``targets=None`` and ``threads_list=None`` means automatic targets: 100, 200, 400, ... ops/s.
    A target point runs ``target x point_seconds`` operations (at least 200); a thread point runs
    for ``point_seconds``.  The sweep ends after :data:`FLAT_POINTS` consecutive points gaining
    less than :data:`MIN_GAIN`, at the end of the list, or on a skip.
    """
    auto = targets is None and threads_list is None
    if threads_list is not None:
        points: list[dict[str, Any]] = [{"threads": t} for t in threads_list]
    elif targets is not None:
        points = [{"target": float(t)} for t in targets]
    else:
        points = [{"target": 100.0 * 2 ** i} for i in range(max_points)]
    out: list[Outcome] = []
    best, flat = 0.0, 0
    for params in points[:max_points] if auto else points:
        if "threads" in params:
            point = replace(clients, threads=params["threads"], operations=None,
                            duration=point_seconds, target=None)
        else:
            point = replace(clients, threads=1, duration=None, target=params["target"],
                            operations=max(200, int(params["target"] * point_seconds)))
        outcome = run_workload(backend, options, spec, point, progress=_labelled(
            progress, " ".join(f"{k} {v:g}" for k, v in params.items()) + " "))
        outcome.params = params
        out.append(outcome)
        if on_point is not None:
            on_point(outcome)
        if outcome.skipped:
            break
        tput = outcome.run.throughput
        if tput < best * (1 + MIN_GAIN):
            flat += 1
            if flat >= FLAT_POINTS:
                break
        else:
            flat = 0
        best = max(best, tput)
    return out


def sweep(backends: list[str], options: dict[str, Any], spec: WorkloadSpec, *,
          config: dict[str, Any], targets: list[float] | None = None,
          threads_list: list[int] | None = None, point_seconds: float = 3.0, rounds: int = 1,
          clients: ClientSettings = ClientSettings(),
          on_point: Callable[[int, Outcome], None] | None = None,
          progress: ProgressFactory = no_progress) -> results.Sweep:
    """Every backend's sweep, ``rounds`` times with the backends interleaved; the
    ``ckptbench.sweep/1`` document with the per-round ratios and their medians.  ``progress``
    gets one outer bar counting the backends' sweeps and each point's bars inside it."""
    if rounds < 1:
        raise SpecError("--rounds must be >= 1")
    check_options(backends, options)
    entries = []

    def every_sweep(update: Callable[[int], None]) -> None:
        for r in range(rounds):
            for i, backend in enumerate(backends):
                points = sweep_points(backend, options_for(backend, options, len(backends) > 1),
                                      spec, targets=targets, threads_list=threads_list,
                                      point_seconds=point_seconds, clients=clients,
                                      on_point=None if on_point is None else
                                      (lambda o, r=r: on_point(r + 1, o)),
                                      progress=_labelled(progress, f"round {r + 1} " if rounds > 1
                                                         else ""))
                for o in points:
                    entry = results.entry(o)
                    if rounds > 1:
                        entry.round = r + 1
                    entries.append(entry)
                update(r * len(backends) + i + 1)

    with_bar(progress, "sweep" + (f", {rounds} rounds" if rounds > 1 else ""),
             rounds * len(backends), every_sweep)
    return results.Sweep(workload=spec.name, config={**config, "workload_spec": spec.to_dict()},
                         results=entries, ratios=results.sweep_ratios(entries))
