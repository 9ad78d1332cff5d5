"""Named crash points: end the process at a chosen step, so a crash test hits it every time.

A crash test that kills a process at a random instant hits a hazard (between compaction's copy
and its delete, say) only by chance.  Code that has such a step marks it with :func:`hit`::

    failpoints.hit("indexed_fs.compaction.after_copy")

and a test arms it through the environment of the process it starts::

    CKPTBENCH_FAILPOINT=indexed_fs.compaction.after_copy          # the first time it is reached
    CKPTBENCH_FAILPOINT=indexed_fs.segment.before_sync@40          # the 40th time
    CKPTBENCH_FAILPOINT=a@3,b                                      # whichever comes first

An armed point reached for the Nth time writes one line to stderr and ends the process with
``os._exit(EXIT_CODE)``: no ``finally`` blocks, no ``atexit``, no buffered data flushed, which is
what a SIGKILL (or, on the lossy filesystem, a power cut) at that instant leaves behind.  Children
inherit the variable, so a Spark executor's Python worker stops at the same named step.

Every point is declared once, with what it models, by the module that owns the step
(:func:`declare`); :data:`DECLARED` is the list tests iterate over.  An unarmed :func:`hit` is one
global lookup and one comparison, cheap enough for a per-record path.

This module imports nothing of the project, so any layer may use it.
"""

from __future__ import annotations

import os
import sys

ENV = "CKPTBENCH_FAILPOINT"
#: exit status of a process ended by a fail point (distinct from a SIGKILL's -9 and from errors)
EXIT_CODE = 87

#: every declared point: name -> what a crash there models
DECLARED: dict[str, str] = {}

_armed: dict[str, int] | None = None
_hits: dict[str, int] = {}


class FailPointSpecError(ValueError):
    """The ``CKPTBENCH_FAILPOINT`` value cannot be parsed."""


def declare(name: str, models: str) -> str:
    """Declare the point ``name`` (``owner.step``) and say what a crash there models."""
    DECLARED[name] = models
    return name


def parse(spec: str) -> dict[str, int]:
    """``"a@3,b"`` -> ``{"a": 3, "b": 1}``; raises :class:`FailPointSpecError` on bad input."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, at, count = part.partition("@")
        try:
            n = int(count) if at else 1
        except ValueError:
            n = 0
        if not name or n < 1:
            raise FailPointSpecError(
                f"{ENV}={spec!r}: {part!r} is not NAME or NAME@N with N >= 1")
        out[name] = n
    return out


def arm(spec: str | None) -> None:
    """Arm the points in ``spec`` (in this process), or disarm all with ``None``/``""``."""
    global _armed
    _hits.clear()
    _armed = parse(spec) or None if spec else None


def armed() -> dict[str, int]:
    """The armed points and the hit on which each fires."""
    return dict(_armed or {})


def is_armed(name: str) -> bool:
    """Whether ``name`` is armed (a step run in C asks first, and leaves the step to Python
    when it is, so that the point is hit where it is declared)."""
    return _armed is not None and name in _armed


def hit(name: str) -> None:
    """Mark that the step ``name`` is reached; end the process here if it is armed for this hit."""
    if _armed is None or name not in _armed:
        return
    count = _hits.get(name, 0) + 1
    _hits[name] = count
    if count >= _armed[name]:
        try:
            os.write(2, f"[FAILPOINT] {name} hit {count}: exiting {EXIT_CODE}\n".encode())
        finally:
            os._exit(EXIT_CODE)


def _arm_from_environment() -> None:
    try:
        arm(os.environ.get(ENV))
    except FailPointSpecError as exc:  # a bad spec must not be ignored silently
        sys.stderr.write(f"error: {exc}\n")
        os._exit(2)


_arm_from_environment()
