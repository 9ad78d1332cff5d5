"""Recovery: load a store, close it cleanly or crash it, reopen it (timed), read everything back.

Two experiments share this shape:

* :func:`recovery` (``bench recovery``): ``records`` keys with values derived from key and seed,
  so the read-back needs no copy of them; after a clean close, or after the loading process was
  SIGKILLed (:mod:`experiments.storage.crash`), the reopen is timed and every key is verified.
* :func:`checkpoint` (``bench checkpoint``): the S4 word-count checkpoint workload through the
  SafeKeeper; with ``crash_recover`` it runs in a child that is SIGKILLed once the queue drained,
  then every PE's state is read back in first-use order and compared with its last acknowledged
  checkpoint.

The reopen time is wall time from ``open_backend`` until it returns: for a store that rebuilds
its index on open, that is the rebuild.  One reopen is one sample on a noisy machine, so
``reopens`` > 1 times that many reopens, each in a fresh process that is SIGKILLed with the store
open (:func:`timed_reopens`: the directory stays as the close or the crash left it, and no
process pays for the reopen before it), and reports their median; the reopen that verifies
comes after them.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from backends import backend_class, open_backend
from workloads import checkpoint as ck
from workloads import core, runner
from workloads.runner import PhaseResult, VerifyResult

from experiments.storage import crash
from experiments.core.results import Reopen
from experiments.core.run import data_dir
from experiments.core.spec import ProgressFactory, SpecError, no_progress, with_bar


@dataclass
class Recovery:
    """A timed reopen and the read-back after it."""

    crash: bool
    eager: bool
    #: the reopen's time; with several timed reopens their median
    open_ms: float
    verified: VerifyResult
    #: every timed reopen's time (empty: only the reopen that verified was timed)
    open_ms_rounds: list[float] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return self.verified.missing == 0 and self.verified.corrupt == 0

    def reopen(self) -> Reopen:
        """The ``recovery`` section of the result document."""
        return Reopen(self.crash, self.eager, self.open_ms, self.verified.missing,
                      self.verified.corrupt, list(self.open_ms_rounds) or None)


@dataclass
class RecoveryResult:
    """``bench recovery``: the load (a phase, or only its time and count after a crash-load)."""

    phases: dict[str, PhaseResult]
    recovery: Recovery
    backend_stats: dict[str, Any] | None
    crash_load: crash.LoadedKeys | None = None


def _require_persistent(backend: str, why: str) -> None:
    if not backend_class(backend).persistent:
        raise SpecError(f"backend {backend!r} keeps nothing after close; {why} needs a "
                        f"persistent backend (e.g. indexed_fs, default_fs)")


def _reopen(backend: str, options: dict[str, Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    store = open_backend(backend, **options)
    return store, (time.perf_counter() - t0) * 1000.0


def _open_timed(backend: str, options: dict[str, Any]) -> float:
    """Child work: open the store and report how long that took (its code loaded first, as in
    a process that has used the backend before); the parent then SIGKILLs the child with the
    store open, so nothing is closed or written on the way out."""
    backend_class(backend)
    return _reopen(backend, options)[1]


def timed_reopens(backend: str, options: dict[str, Any], n: int) -> list[float]:
    """The time of ``n`` reopens of the store, each in a fresh process killed with the store
    open (:func:`experiments.storage.crash.run_then_kill`)."""
    return [crash.run_then_kill(_open_timed, backend, options,
                                what=f"timed reopen {i + 1} of {backend}") for i in range(n)]


def recovery(backend: str, options: dict[str, Any], *, records: int, value_size: int,
             seed: int = 1, load_batch: int = 1000, crash_load: bool = False,
             eager: bool = False, reopens: int = 1,
             progress: ProgressFactory = no_progress) -> RecoveryResult:
    """Load ``records`` keys, close or crash, reopen (timed; with ``reopens`` > 1 the median of
    that many reopens in fresh processes, see the module notes) and verify every key."""
    if records < 1:
        raise SpecError("--records must be >= 1")
    if reopens < 1:
        raise SpecError("--reopens must be >= 1")
    _require_persistent(backend, "recovery")
    spec = core.WorkloadSpec(name="recovery", records=records, operations=0, read=1.0,
                             update=0.0, value_size=value_size)
    workload = core.CoreWorkload(spec, seed=seed)

    def value_for(key: str) -> bytes:
        return core.deterministic_value(key, value_size, seed)

    options = dict(options)
    phases: dict[str, PhaseResult] = {}
    loaded = None
    with data_dir(backend_class(backend), options):
        if crash_load:  # the child counts its keys where the bar can read them
            loaded = with_bar(progress, "load", records, lambda update: crash.load_then_kill(
                backend, options, records, value_size, seed=seed, batch=load_batch, flush=False,
                progress=update))
        else:
            store = open_backend(backend, **options)
            try:
                phases["load"] = with_bar(progress, "load", records, lambda update: runner.load(
                    store, workload, batch=load_batch, value_for=value_for, progress=update))
            finally:
                store.close()
        rounds = timed_reopens(backend, options, reopens) if reopens > 1 else []
        store, open_ms = _reopen(backend, options)
        if rounds:
            open_ms = statistics.median(rounds)
        try:
            verified = with_bar(progress, "verify", records, lambda update: runner.verify(
                store, workload.load_keys(), value_for, eager=eager, progress=update))
            stats = store.stats()
        finally:
            store.close()
    phases["run"] = verified.phase
    return RecoveryResult(phases, Recovery(crash_load, eager, open_ms, verified, rounds), stats,
                          loaded)


@dataclass
class CheckpointRun:
    """``bench checkpoint``: the SafeKeeper run, and the recovery after a crash if asked."""

    result: ck.CheckpointResult
    recovery: Recovery | None = None


def _checkpoint_child(backend: str, options: dict[str, Any],
                      spec: ck.CheckpointSpec) -> ck.CheckpointResult:
    """Crash work: the checkpoint run, its histograms encoded for the trip to the parent."""
    store = open_backend(backend, **options)
    result = ck.run_checkpoint(store, spec)
    result.phase.measurements = result.phase.measurements.encode()  # type: ignore[assignment]
    return result


def checkpoint_then_crash(backend: str, options: dict[str, Any],
                          spec: ck.CheckpointSpec) -> ck.CheckpointResult:
    """Run the checkpoint workload in a child, SIGKILL it before it closes the store.  The
    SafeKeeper is drained first, so every acknowledged checkpoint must survive."""
    from workloads.measure import Measurements

    result = crash.run_then_kill(_checkpoint_child, backend, options, spec,
                                 what=f"the checkpoint run on {backend}")
    result.phase.measurements = Measurements.decode(result.phase.measurements)
    return result


def reopen_and_verify(backend: str, options: dict[str, Any], result: ck.CheckpointResult, *,
                      eager: bool = False, progress: ProgressFactory = no_progress) -> Recovery:
    """Reopen (timed), then read back every checkpointed PE in first-use order
    (``RECOVERY-READ``) and compare it with its last acknowledged checkpoint.  With several
    writers two writes of one PE can race, so an older value can win legitimately: verify with
    one writer."""
    store, open_ms = _reopen(backend, options)
    try:
        keys = [k for k in result.first_use if k in result.last_written]
        verified = with_bar(progress, "recover", len(keys), lambda update: runner.verify(
            store, keys, result.last_written.__getitem__, eager=eager, name="RECOVERY-READ",
            progress=update))
    finally:
        store.close()
    return Recovery(True, eager, open_ms, verified)


def checkpoint(backend: str, options: dict[str, Any], spec: ck.CheckpointSpec, *,
               crash_recover: bool = False, eager: bool = False,
               progress: ProgressFactory = no_progress) -> CheckpointRun:
    """The checkpoint workload, optionally crashed and recovered."""
    if eager and not crash_recover:
        raise SpecError("--eager only applies to --crash-recover; add --crash-recover")
    if crash_recover:
        _require_persistent(backend, "--crash-recover")
    options = dict(options)
    with data_dir(backend_class(backend), options):
        if crash_recover:
            result = checkpoint_then_crash(backend, options, spec)
            return CheckpointRun(result, reopen_and_verify(backend, options, result,
                                                           eager=eager, progress=progress))
        store = open_backend(backend, **options)
        try:
            return CheckpointRun(with_bar(progress, "checkpoint", spec.events, lambda update:
                                          ck.run_checkpoint(store, spec, progress=update)))
        finally:
            store.close()
