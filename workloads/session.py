"""Run one workload against one backend end to end (temp dir, open, load, run, close), and the
``bench compare`` / ``bench sweep`` loops built on it.

A backend that cannot open (server down, client package missing, bad environment) is returned as
*skipped* with the reason — comparisons and sweeps report it, never drop it silently.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .core import CoreWorkload, WorkloadSpec
from .measure import Measurements
from .runner import ClientSettings, PhaseResult, load, run

#: a sweep stops after this many consecutive points gaining less than MIN_GAIN throughput
FLAT_POINTS = 2
MIN_GAIN = 0.05


@contextlib.contextmanager
def data_dir(backend: str, options: dict[str, Any]) -> Iterator[str | None]:
    """A fresh temporary ``path`` for file backends unless one was given; removed afterwards."""
    from backends import backend_class

    if "path" not in backend_class(backend).all_options():
        yield None
        return
    if options.get("path"):
        given = str(options["path"])
        yield given if "://" in given else os.path.abspath(os.path.expanduser(given))
        return
    tmp = tempfile.mkdtemp(prefix=f"ckptbench-{backend}-")
    options["path"] = os.path.join(tmp, "store")
    try:
        yield options["path"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        options.pop("path", None)


@dataclass
class Outcome:
    """One backend's run: its phases, or why it was skipped."""

    backend: str
    phases: dict[str, PhaseResult] = field(default_factory=dict)
    skipped: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def run(self) -> PhaseResult:
        return self.phases["run"]


def run_workload(backend: str, options: dict[str, Any], spec: WorkloadSpec, *, seed: int = 1,
                 threads: int = 1, operations: int | None = None, duration: float | None = None,
                 target: float | None = None, load_batch: int = 1000) -> Outcome:
    """Load and run ``spec`` on a fresh store of ``backend``; skipped (with reason) if it cannot
    open.  ``options`` is copied, so one dict serves many backends of the same kind."""
    from backends import BackendUnavailableError, CkptError, open_backend

    options = dict(options)
    try:
        with data_dir(backend, options):
            store = open_backend(backend, **options)
            try:
                workload = CoreWorkload(spec, seed=seed)
                phases = {"load": load(store, workload, batch=load_batch)}
                phases["run"] = run(store, workload, ClientSettings(
                    threads=threads, operations=operations, duration=duration, target=target,
                    seed=seed, load_batch=load_batch))
            finally:
                store.close()
    except (BackendUnavailableError, ImportError, ConnectionError, OSError) as exc:
        return Outcome(backend, skipped=f"{type(exc).__name__}: {exc}".strip())
    except CkptError as exc:
        if isinstance(exc, (ValueError,)):  # unknown backend / bad option: the user's mistake
            raise
        return Outcome(backend, skipped=f"{type(exc).__name__}: {exc}")
    return Outcome(backend, phases)


def overall(measurements: Measurements, intended: bool = False) -> dict[str, Any]:
    """All successful ops merged: count, mean, p50, p99 in µs.  ``intended``: the
    ``Intended-<OP>`` histograms instead (latency from the intended start, queueing included)."""
    merged = Measurements()
    merged.histogram("ALL")
    for name, hist in measurements.histograms.items():
        if name.endswith("-FAILED") or name.startswith("Intended-") != intended:
            continue
        merged.histogram("ALL").add(hist)
    return merged.summary("ALL")


def compare(backends: list[str], options: dict[str, Any], spec: WorkloadSpec,
            on_result: Callable[[Outcome], None] | None = None, **run_kw: Any) -> list[Outcome]:
    """Each backend with identical settings, in order."""
    out = []
    for backend in backends:
        outcome = run_workload(backend, options, spec, **run_kw)
        if on_result is not None:
            on_result(outcome)
        out.append(outcome)
    return out


def sweep(backend: str, options: dict[str, Any], spec: WorkloadSpec, *,
          targets: list[float] | None = None, threads_list: list[int] | None = None,
          point_seconds: float = 3.0, max_points: int = 12, seed: int = 1,
          on_point: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Raise the target rate (or the thread count) until throughput stops growing.

    ``targets=None`` and ``threads_list=None`` means automatic targets: 100, 200, 400, ... ops/s.
    Each point runs ``point_seconds`` (``operations`` = target x seconds, at least 200; a thread
    point runs for the duration).  The sweep ends after :data:`FLAT_POINTS` consecutive points
    gaining less than :data:`MIN_GAIN`, or at the end of the list, or on a skip.
    """
    auto = targets is None and threads_list is None
    points: list[dict[str, Any]]
    if threads_list is not None:
        points = [{"threads": t} for t in threads_list]
    elif targets is not None:
        points = [{"target": float(t)} for t in targets]
    else:
        points = [{"target": 100.0 * 2 ** i} for i in range(max_points)]
    out: list[Outcome] = []
    best, flat = 0.0, 0
    for params in points[:max_points] if auto else points:
        if "threads" in params:
            outcome = run_workload(backend, options, spec, seed=seed, threads=params["threads"],
                                   operations=None, duration=point_seconds)
        else:
            ops = max(200, int(params["target"] * point_seconds))
            outcome = run_workload(backend, options, spec, seed=seed, operations=ops,
                                   target=params["target"])
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
