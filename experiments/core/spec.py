"""What to run and what came of it: the one ``RunSpec`` / ``RunResult`` pair every experiment uses.

A :class:`RunSpec` says everything a workload run needs (backend and its options, the workload,
the client settings, where the clients run, whether to bracket the run with baselines); the CLI
builds one from its arguments and nothing else crosses from the CLI into the experiments.  A
:class:`RunResult` holds what the run produced: its phases (with their HdrHistograms), the
store's own statistics, the extra sections an experiment adds, and the environment and command
line that produced it, so the JSON written from it can always be traced back.

Progress is reported through a :data:`ProgressFactory` the caller passes in (the CLI's is a
progress bar on stderr), so experiments never decide how, or whether, progress is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeVar

from backends import Backend, backend_class
from workloads.core import WorkloadSpec
from workloads.runner import ClientSettings, PhaseResult

from experiments.core import results
from experiments.core.document import Environment


class SpecError(ValueError):
    """A combination of settings that cannot work (e.g. ``--baseline`` with ``--processes``)."""


class Bar(Protocol):
    """One progress display: told how much is done, then closed."""

    def update(self, done: int) -> None: ...

    def close(self) -> None: ...


#: ``factory(label, total)`` -> a :class:`Bar`; ``total`` is ``None`` when unknown
ProgressFactory = Callable[[str, "int | None"], Bar]


class _Silent:
    def update(self, done: int) -> None:
        pass

    def close(self) -> None:
        pass


def no_progress(_label: str, _total: int | None) -> Bar:
    """The progress factory that shows nothing."""
    return _Silent()


T = TypeVar("T")


def with_bar(progress: ProgressFactory, label: str, total: int | None,
             work: Callable[[Callable[[int], None]], T]) -> T:
    """``work(update)`` under a bar of ``total`` units labelled ``label``, closed however
    ``work`` ends (a bar left open would stay on the terminal under the report)."""
    bar = progress(label, total)
    try:
        return work(bar.update)
    finally:
        bar.close()


@dataclass(frozen=True)
class RunSpec:
    """One workload run against one backend."""

    backend: str
    #: backend options as given (``path`` may be filled in with a temporary directory)
    options: dict[str, Any]
    workload: WorkloadSpec
    clients: ClientSettings = ClientSettings()
    #: client processes (beyond the GIL), each with ``clients.threads`` threads
    processes: int = 1
    #: run the clients as Spark tasks on this master, ``spark_clients`` of them
    spark_master: str | None = None
    spark_clients: int | None = None
    #: the store already holds the records (a ``load`` happened before, at ``options["path"]``)
    skip_load: bool = False
    #: load only (``bench load``): the run phase is a later invocation's
    skip_run: bool = False
    #: threads of the load phase (YCSB's ``load`` uses ``-threads``; the one-invocation
    #: workload commands load with one)
    load_threads: int = 1
    #: write one HdrHistogram interval log per measurement, ``<hdr_prefix><NAME>.hdr``
    #: (YCSB's ``hdrhistogram.fileoutput`` with ``hdrhistogram.output.path``)
    hdr_prefix: str | None = None
    #: bracket the run with bare append+fdatasync loops (:mod:`experiments.core.baselines`)
    baseline: bool = False
    #: seconds between status lines on stderr (YCSB's ``-s``)
    status_interval: float | None = None
    #: the settings as the user gave them, recorded verbatim in the result's ``config``
    config: dict[str, Any] = field(default_factory=dict)
    #: the class behind ``backend``: the CLI, which looked the name up to check the options,
    #: passes it on; otherwise the registry is asked here, once, and the run asks the class
    store: type[Backend] | None = None

    def __post_init__(self) -> None:
        if self.store is None:
            object.__setattr__(self, "store", backend_class(self.backend))
        elif self.store.name != self.backend:
            raise SpecError(f"RunSpec: backend {self.backend!r} but class {self.store.name!r}")

    @property
    def backend_class(self) -> type[Backend]:
        assert self.store is not None  # __post_init__ set it
        return self.store


@dataclass
class RunResult:
    """What one run produced."""

    spec: RunSpec
    phases: dict[str, PhaseResult]
    backend_stats: dict[str, Any] | None = None
    #: sections an experiment adds to the document (``spark``, ``clients``: fields of
    #: :class:`experiments.core.results.Result`)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the bare-loop floors around the run, with ``spec.baseline``
    #: (:class:`experiments.core.baselines.Baseline`)
    baseline: Any = None
    environment: Environment = field(default_factory=Environment.here)

    def document(self, workload: str | None = None) -> results.Result:
        """The ``ckptbench.result/1`` document of this run."""
        config = dict(self.spec.config)
        config.setdefault("backend_options", dict(self.spec.options))
        config.setdefault("workload_spec", self.spec.workload.to_dict())
        return results.result(workload=workload or self.spec.workload.name,
                              backend=self.spec.backend, config=config, phases=self.phases,
                              backend_stats=self.backend_stats, environment=self.environment,
                              seed=self.spec.clients.seed,
                              baseline=None if self.baseline is None else self.baseline.floor(),
                              **self.extra)
