"""YCSB-like workload layer: generators, workload definitions, runner, measurements.

Independent of the CLI (``bench`` imports this package, never the other way round).
Modules: ``generators`` (YCSB's distributions), ``core`` (workload specs and clients), ``measure``
(HdrHistogram recording), ``runner`` (load/run/verify phases), ``parallel`` (``--processes``),
``checkpoint`` (the S4 SafeKeeper word-count workload and its recovery), ``session`` (one backend
end to end, ``compare`` and ``sweep`` loops).
"""

from .core import PRESETS, CoreWorkload, WorkloadError, WorkloadSpec, deterministic_value, preset
from .measure import Measurements, Recorder
from .runner import PhaseResult, VerifyResult, fsync_baseline, load, run, verify

__all__ = [
    "PRESETS",
    "CoreWorkload",
    "Measurements",
    "PhaseResult",
    "Recorder",
    "VerifyResult",
    "WorkloadError",
    "WorkloadSpec",
    "deterministic_value",
    "fsync_baseline",
    "load",
    "preset",
    "run",
    "verify",
]
