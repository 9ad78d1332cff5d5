"""A failed instance's recovery line, from its durable checkpoints and the senders' logs.

The adapter between the protocol and the pure logic of :mod:`spark_integration.recovery_line`:
it builds the checkpoint graph of one keyed instance and the senders feeding it and lets
rollback propagation pick the checkpoint to restore and the log range of each channel to replay.
"""

from __future__ import annotations

from ...recovery_line import Checkpoint, RecoveryLine, compute


def sender_id(sender: int) -> int:
    """Senders' ids in the checkpoint graph (keyed instances are 0, 1, ...)."""
    return -1 - sender


def line_for(instance: int, checkpoints: list[int], senders: int, logged: int) -> RecoveryLine:
    """The recovery line of ``instance`` (its durable checkpoints, by the micro-batch they end at)
    and the ``senders`` feeding it.  Every channel carries one message per micro-batch, its sequence
    number the batch, so checkpoint ``b`` processed ``b`` on each channel; a sender is stateless
    and its one "checkpoint" is what it has logged: every channel up to ``logged``."""
    graph = {instance: [Checkpoint(instance, b, processed={sender_id(s): b for s in range(senders)})
                        for b in checkpoints]}
    for s in range(senders):
        graph[sender_id(s)] = [Checkpoint(sender_id(s), 1, sent={instance: logged})]
    return compute(graph)
