"""Checkpointing protocols: one :class:`~.base.Protocol` interface, one module per protocol."""

from __future__ import annotations

from ..conf import Settings, SparkIntegrationError
from .base import Protocol


def make_protocol(settings: Settings) -> Protocol:
    """The driver-side protocol object for ``settings.protocol``."""
    if settings.protocol == "none":
        from .none import NoneProtocol

        return NoneProtocol(settings)
    if settings.protocol == "coordinated":
        from .coordinated import CoordinatedProtocol

        return CoordinatedProtocol(settings)
    if settings.protocol == "uncoordinated":
        from .uncoordinated import UncoordinatedProtocol

        return UncoordinatedProtocol(settings)
    if settings.protocol == "logio":
        from .logio import LogioProtocol

        return LogioProtocol(settings)
    raise SparkIntegrationError(f"protocol {settings.protocol!r} is not implemented yet")


__all__ = ["Protocol", "make_protocol"]
