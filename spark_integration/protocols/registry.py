"""Protocol name -> implementation: the one table the conf, the runner, ``bench spark`` and the
matrix ask.

Implementations are imported lazily (a ``"module:Class"`` string), so reading the table never
imports pyspark or a protocol's dependencies.  Each :class:`Registration` also says what the
protocol takes, so callers ask the table instead of comparing names: whether it writes to a
backend, whether failures can be injected, which operator states (jobs) it covers, whether it is
exactly-once, and whether it is a *baseline* — a whole run without any protocol of ours (Spark's
own state store), implemented by a :class:`~.base.Baseline` instead of a :class:`~.base.Protocol`.

A new protocol joins everything (conf validation, ``bench spark --protocol``, ``bench
spark-matrix --protocols``) with its module and one line in ``_BUILTIN``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import SparkIntegrationError

if TYPE_CHECKING:  # annotations only: listing names must not import the protocols' machinery
    from .base import Baseline, Protocol

#: the operator states (``Settings.operator``) of every job
ALL_OPERATORS = ("count", "join")


class UnknownProtocolError(SparkIntegrationError):
    """A protocol name that is not registered; the message lists the registered ones."""


@dataclass(frozen=True)
class Registration:
    """One protocol (or baseline) and what it supports.

    A protocol that does not use a backend ignores one given to it; a baseline refuses one (it
    has its own storage), as it refuses injected failures when ``failure_injection`` is False.
    """

    name: str
    target: str  # "module:Class" of the Protocol (or Baseline) subclass
    summary: str  # one line for ``--help``
    baseline: bool = False
    uses_backend: bool = True  # writes checkpoints to ``spark.ckptbench.backend``
    failure_injection: bool = True  # honours ``spark.ckptbench.failAt``
    exactly_once: bool = True  # False: a run with failures is expected to lose state
    operators: tuple[str, ...] = ALL_OPERATORS  # the operator states (jobs) it covers

    def supports(self, operator: str) -> bool:
        return operator in self.operators

    def load(self) -> type[Protocol] | type[Baseline]:
        module_name, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module_name), attr)


_BUILTIN = (
    Registration("none", "spark_integration.protocols.none:NoneProtocol",
                 "no checkpoints, so a failure loses the state (the denominator of overhead ratios)",
                 uses_backend=False, exactly_once=False),
    Registration("uncoordinated", "spark_integration.protocols.uncoordinated.protocol:UncoordinatedProtocol",
                 "instances checkpoint on their own clocks; senders log; a failed instance recovers alone"),
    Registration("coordinated", "spark_integration.protocols.coordinated:CoordinatedProtocol",
                 "epochs at micro-batch boundaries, committed by the driver; everyone rolls back"),
    Registration("cic", "spark_integration.protocols.cic.protocol:CicProtocol",
                 "uncoordinated plus HMNR's forced checkpoints, driven by clocks piggybacked on every message"),
    Registration("logio", "spark_integration.protocols.logio:LogioProtocol",
                 "LOG.io's logged events and one atomic commit per Input Set; a failed instance recovers alone"),
    Registration("spark-state", "spark_integration.spark_state:SparkStateBaseline",
                 "Spark's own RocksDB state store, a baseline (no backend; keyed counts, sized state, "
                 "failures restart the query from its checkpoint)",
                 baseline=True, uses_backend=False, operators=("count",)),
)

_registry: dict[str, Registration] = {r.name: r for r in _BUILTIN}


def register(reg: Registration) -> Registration:
    """Add (or replace) a protocol under ``reg.name``, e.g. from a plug-in module."""
    _registry[reg.name] = reg
    return reg


def protocol_names(baseline: bool | None = None) -> list[str]:
    """Registered names in registration order; only baselines (True) or only protocols (False)."""
    return [n for n, r in _registry.items() if baseline is None or r.baseline == baseline]


def registration(name: str) -> Registration:
    """The registration of ``name``; one clear error listing the valid names otherwise."""
    try:
        return _registry[name]
    except (KeyError, TypeError):
        raise UnknownProtocolError(
            f"unknown protocol {name!r}; valid protocols: {', '.join(protocol_names())}") from None


def protocol_class(name: str) -> type[Protocol]:
    """The :class:`~.base.Protocol` behind ``name`` (a baseline is not one)."""
    reg = registration(name)
    if reg.baseline:
        raise SparkIntegrationError(f"{name!r} is a baseline, not a checkpointing protocol")
    return reg.load()  # type: ignore[return-value]


def baseline_class(name: str) -> type[Baseline]:
    """The :class:`~.base.Baseline` behind ``name``."""
    reg = registration(name)
    if not reg.baseline:
        raise SparkIntegrationError(f"{name!r} is a checkpointing protocol, not a baseline")
    return reg.load()  # type: ignore[return-value]
