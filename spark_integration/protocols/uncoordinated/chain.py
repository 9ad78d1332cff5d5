"""Chains of an instance's checkpoints: which can be restored, which must be kept, and whether
the next one is full, an increment, or waits.

A checkpoint is *full* (base 0: the instance's whole state) or an *increment* over the one its
commit record names as its base (the keys changed since that one was taken, and tombstones of
those dropped; :attr:`spark_integration.layouts.base.Encoded.base`).  Restoring a checkpoint
loads its *chain*: the full checkpoint it goes back to, then each increment in order.  A
checkpoint whose chain has a link missing cannot be restored; it is left out of the recovery
line as if it had never been written.

Why an increment is always over a durable checkpoint: an instance takes one only when the
checkpoint before it is durable (:func:`next_base`).  While the writer is still writing the
previous one, a due checkpoint waits for the instance's next due time, its changes kept in the
state's dirty set (Flink's one checkpoint in flight at a time).  So every request in a writer's
queue goes on from a checkpoint already in the store, the queue holds at most one request of
an instance, and no request of a chain is dropped from it.  A write that fails, a recovery, or a
discarded checkpoint starts the next chain with a full checkpoint, as does every
``fullEvery``-th checkpoint, which bounds a restore's chain.  ``fullEvery`` 1 is CheckMate's
uncoordinated protocol: every checkpoint full, taken when due whatever the writer is doing.

The executor-local *chain note* (``i<i>.chain``: the last checkpoint this instance handed to
its writer, its chain's length, and the process whose writer holds it) is the instance's memory
of its chain between tasks; the writer's durable and failed notes (:mod:`.writer`) say what
became of it.  A request can also vanish without a note: an injected failure ends its Python
worker with ``os._exit``, and the writer thread of that process, holding another instance's
request, dies with it.  So a checkpoint whose writer's process is gone is taken as failed, and
the next one starts a new chain; without that the instance would wait for it forever.
"""

from __future__ import annotations

import contextlib
import os
from typing import Mapping

from services.common import pid_alive, started_at

from ...settings import Settings, local_path, replace_local


def chains(bases: Mapping[int, int]) -> dict[int, list[int]]:
    """Every restorable checkpoint (``bases``: checkpoint -> its base, 0 for a full one) and
    its chain, oldest first."""
    out: dict[int, list[int]] = {}
    for b in sorted(bases):
        base = bases[b]
        if base == 0:
            out[b] = [b]
        elif 0 < base < b and base in out:
            out[b] = out[base] + [b]
    return out


def kept(bases: Mapping[int, int], newest: int) -> set[int]:
    """The checkpoints an instance keeps once ``newest`` is durable: its chain, and the chain of
    the newest restorable checkpoint before it (``newest`` is of a micro-batch the driver has
    not committed yet, and may still be discarded: see :mod:`.writer`)."""
    found = chains(bases)
    keep = set(found.get(newest, [newest]))
    older = [b for b in found if b < newest]
    if older:
        keep.update(found[max(older)])
    return keep


# --------------------------------------------------------------------- the executor-local note
def _note_path(settings: Settings, instance: int) -> str:
    return local_path(settings, f"i{instance}.chain")


def this_process() -> str:
    """This process, as a chain note names the writer holding its checkpoint: pid and start time
    (a pid alone may be reused by a later process)."""
    return f"{os.getpid()}:{started_at(os.getpid())}"


def process_alive(process: str) -> bool:
    """Whether the process :func:`this_process` named (in that process) is still running."""
    pid, _, start = process.partition(":")
    return pid_alive(int(pid)) and str(started_at(int(pid))) == start


def read_note(settings: Settings, instance: int) -> tuple[int, int, str] | None:
    """(the last checkpoint handed to the writer, its chain's length, the writer's process);
    None: the next is full."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        with open(_note_path(settings, instance)) as f:
            last, length, process = f.read().split()
        return int(last), int(length), process
    return None


def write_note(settings: Settings, instance: int, last: int, length: int) -> None:
    """Note checkpoint ``last`` (its chain ``length`` long) as held by this process's writer."""
    replace_local(_note_path(settings, instance), f"{last} {length} {this_process()}")


def taken(settings: Settings, instance: int, batch: int, base: int) -> None:
    """Note checkpoint ``batch`` as handed to this process's writer: the first of a new chain
    (``base`` 0), or one more link of the noted chain it goes on from."""
    note = read_note(settings, instance)
    write_note(settings, instance, batch, note[1] + 1 if base and note else 1)


def forget_note(settings: Settings, instance: int) -> None:
    """The instance's next checkpoint is full (after a restore or a discarded checkpoint)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(_note_path(settings, instance))


def next_base(settings: Settings, instance: int, batch: int, durable: int, failed: int) -> int | None:
    """What the instance's checkpoint due after micro-batch ``batch`` is: 0 a full one, ``b`` an
    increment over checkpoint ``b``, None none now (the previous one is still being written).
    ``durable`` and ``failed`` are the newest checkpoints the writer noted durable and failed."""
    if settings.full_every <= 1:
        return 0
    note = read_note(settings, instance)
    if note is None:
        return 0
    last, length, writer = note
    if last >= batch or failed >= last:
        return 0  # a re-run of the batch, or the write failed: a chain starts afresh
    if durable < last:
        # in the writer's hands still (the next due time asks again), or lost with its process
        return None if process_alive(writer) else 0
    if durable > last or length >= settings.full_every:
        return 0
    return last
