"""YCSB-like workload layer: generators, workload definitions, runner, measurements.

Independent of the CLI and of any one backend: ``bench`` and ``experiments`` import this package,
never the other way round.
Modules: ``generators`` (YCSB's distributions), ``core`` (workload specs and clients), ``record``
(the record models and how fields are encoded into a value), ``properties`` (YCSB's workload
files and ``-p`` properties; the shipped files are in ``ycsb/``), ``measure`` (HdrHistogram
recording), ``status`` (status lines and HdrHistogram interval logs while a phase runs),
``runner`` (load/run/verify phases and their client settings),
``parallel`` (``--processes``), ``spark_clients`` (clients as Spark tasks), ``checkpoint`` (the S4
SafeKeeper word-count workload), ``placement`` (``--cpus``).  Multi-step experiments built from
these phases live in :mod:`experiments`.
"""

from .core import PRESETS, CoreWorkload, WorkloadError, WorkloadSpec, deterministic_value, preset
from .measure import Measurements, Recorder
from .runner import ClientSettings, PhaseResult, VerifyResult, load, run, verify

__all__ = [
    "PRESETS",
    "ClientSettings",
    "CoreWorkload",
    "Measurements",
    "PhaseResult",
    "Recorder",
    "VerifyResult",
    "WorkloadError",
    "WorkloadSpec",
    "deterministic_value",
    "load",
    "preset",
    "run",
    "verify",
]
