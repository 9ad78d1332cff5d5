"""CheckMate's cyclic query (reachability), emulated through the message log: pure logic, no Spark.

Spark's micro-batch model has no cycles: a micro-batch's keyed stage cannot feed its own input.
CheckMate's reachability query is a cycle — a join of links with *sources* (reachable nodes and
their paths) whose output, a new source, goes back into the join on the instance that owns the
link's end node.  Here the cycle runs **through the message log**, the way our uncoordinated
senders log: in micro-batch ``b`` instance ``i`` joins its links with the sources it received,
and every new source for a node owned by ``j`` becomes a logged message ``i -> j`` with the next
sequence number of that channel, delivered to ``j`` in micro-batch ``b + 1``.

What the emulation keeps from the real protocols: the checkpoint schedule
(:class:`~spark_integration.protocols.uncoordinated.schedule.InstanceSchedule`, each instance on
its own clock), HMNR's piggybacks and forced checkpoints (:mod:`.protocols.cic.hmnr`, the same
code the Spark protocol runs), per-channel sequence numbers in every checkpoint, and recovery by
rollback propagation (:func:`spark_integration.recovery_line.compute`, the same code).  What it
drops: the operators' state and real time — each instance's work per micro-batch is "receive,
join, send", so the counts it reports (checkpoints, forced and useless ones, messages replayed,
piggybacked bytes) are exact for the message pattern, while checkpoint, restart and recovery
*times* are not measured (there is nothing to time).

The message pattern follows CheckMate's generator (60 % new links, 15 % new sources, 20 % link
deletions, 5 % source deletions over a static node set): a new source reaches ``fanout`` links on
average, each an edge to a uniformly chosen node; a message is sent on a channel when at least one
new source crosses it in the micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .protocols.cic.hmnr import Hmnr, piggyback_size
from .protocols.uncoordinated.schedule import InstanceSchedule
from .recovery_line import Checkpoint, compute

RECORD_BYTES = 40  # a record (source node, reachable node, path length, ...) as 5 int64


@dataclass
class CyclicResult:
    protocol: str
    instances: int
    batches: int
    basic: int = 0
    forced: int = 0
    useless: int = 0  # checkpoints behind the recovery line after the failure
    rolled_back: int = 0  # instances the line moved back (the failed one included)
    rollback_batches: int = 0  # micro-batches of work undone over all instances
    replayed_messages: int = 0  # logged messages re-sent along the line
    messages: int = 0
    records: int = 0
    piggybacked_bytes: int = 0
    domino: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def checkpoints(self) -> int:
        return self.basic + self.forced

    @property
    def message_bytes_ratio(self) -> float:
        """Bytes on the wire over the bytes of a run without piggybacks."""
        payload = self.records * RECORD_BYTES
        return (payload + self.piggybacked_bytes) / payload if payload else 1.0


def simulate(protocol: str, instances: int = 5, batches: int = 60, interval: int = 4, jitter: int = 1,
             fail_batch: int = 48, fail_instance: int = 0, rate: float = 3.0, seed: int = 1) -> CyclicResult:
    """One run of the cyclic query under ``protocol`` (``uncoordinated`` or ``cic``), a failure of
    ``fail_instance`` during micro-batch ``fail_batch`` (CheckMate: second 48 of 60)."""
    if protocol not in ("uncoordinated", "cic"):
        raise ValueError(f"cyclic query: protocol {protocol!r}; valid: uncoordinated, cic")
    rng = np.random.default_rng(seed)
    n = instances
    sched = InstanceSchedule(interval, jitter, f"cyclic-{seed}")
    hmnr = [Hmnr(n, i) for i in range(n)]
    sent = np.zeros((n, n), np.int64)  # sent[i, j]: last seq sent on channel i -> j
    got = np.zeros((n, n), np.int64)  # got[j, i]: last seq processed by j from i
    ckpts: dict[int, list[Checkpoint]] = {i: [] for i in range(n)}
    taken_at: dict[tuple[int, int], int] = {}  # (instance, index) -> micro-batch it ends at
    inbox: list[list[tuple[int, int, object]]] = [[] for _ in range(n)]  # (src, seq, piggyback)
    res = CyclicResult(protocol, n, batches)

    def take(i: int, batch: int) -> None:
        idx = len(ckpts[i]) + 1
        ckpts[i].append(Checkpoint(i, idx, sent={j: int(sent[i, j]) for j in range(n) if j != i},
                                   processed={j: int(got[i, j]) for j in range(n) if j != i}))
        taken_at[(i, idx)] = batch

    for b in range(1, fail_batch):
        outgoing: list[list[tuple[int, int, object]]] = [[] for _ in range(n)]
        for i in range(n):
            messages, inbox[i] = inbox[i], []
            if protocol == "cic" and messages:
                trial = Hmnr.from_bytes(hmnr[i].to_bytes())
                if any(trial.receive(pb) for _, _, pb in messages):
                    hmnr[i].checkpoint(forced=True)  # before the micro-batch's messages
                    take(i, b - 1)
                    res.forced += 1
                for _, _, pb in messages:
                    hmnr[i].merge(pb)
            for src, seq, _ in messages:
                got[i, src] = max(got[i, src], seq)
            # join: new sources (from input and from messages) meet links; some cross to others
            new_sources = rng.poisson(rate * 0.15 / 0.75 + 0.2 * len(messages))
            for _ in range(new_sources):
                j = int(rng.integers(n))
                if j == i:
                    continue  # stays on this instance: no message
                records = 1 + int(rng.poisson(2))
                if not any(dst == j for dst, _, _ in outgoing[i]):
                    sent[i, j] += 1
                    pb = hmnr[i].send(j) if protocol == "cic" else None
                    outgoing[i].append((j, int(sent[i, j]), pb))
                    res.messages += 1
                res.records += records
                if protocol == "cic":
                    res.piggybacked_bytes += records * piggyback_size(n)
            if sched.due(i, b):
                hmnr[i].checkpoint()
                take(i, b)
                res.basic += 1
        for i in range(n):
            for j, seq, pb in outgoing[i]:
                inbox[j].append((i, seq, pb))

    # failure of fail_instance during fail_batch: its volatile state is gone; the others' volatile
    # states (after fail_batch - 1) are candidates of the line, as their newest "checkpoints"
    graph: dict[int, list[Checkpoint]] = {}
    for i in range(n):
        graph[i] = list(ckpts[i])
        if i != fail_instance:
            graph[i].append(Checkpoint(i, len(ckpts[i]) + 1,
                                       sent={j: int(sent[i, j]) for j in range(n) if j != i},
                                       processed={j: int(got[i, j]) for j in range(n) if j != i}))
            taken_at[(i, len(ckpts[i]) + 1)] = fail_batch - 1
    line = compute(graph)
    for i in range(n):
        at = line.line[i]
        newest = len(graph[i])
        if at != newest or i == fail_instance:
            res.rolled_back += 1
            res.rollback_batches += (fail_batch - 1) - taken_at.get((i, at), 0)
        res.useless += sum(1 for idx in line.useless[i] if idx <= len(ckpts[i]))
    res.replayed_messages = sum(hi - lo for lo, hi in line.replay.values())
    res.domino = line.domino
    return res


def compare(instances: int, runs: int, **kw) -> dict[str, dict[str, float]]:
    """Means over ``runs`` seeds of :func:`simulate` under both protocols, same message pattern
    per seed (the generator's draws do not depend on the protocol)."""
    out: dict[str, dict[str, float]] = {}
    for protocol in ("uncoordinated", "cic"):
        rs = [simulate(protocol, instances, seed=s, **kw) for s in range(1, runs + 1)]
        total = sum(r.checkpoints for r in rs)
        out[protocol] = {
            "checkpoints": total / runs,
            "basic": sum(r.basic for r in rs) / runs,
            "forced": sum(r.forced for r in rs) / runs,
            "useless": sum(r.useless for r in rs) / runs,
            "useless_pct": 100.0 * sum(r.useless for r in rs) / total if total else 0.0,
            "rolled_back": sum(r.rolled_back for r in rs) / runs,
            "rollback_batches": sum(r.rollback_batches for r in rs) / runs,
            "replayed_messages": sum(r.replayed_messages for r in rs) / runs,
            "messages": sum(r.messages for r in rs) / runs,
            "piggybacked_bytes": sum(r.piggybacked_bytes for r in rs) / runs,
            "message_bytes_ratio": float(np.mean([r.message_bytes_ratio for r in rs])),
            "domino_runs": sum(r.domino for r in rs),
        }
    return out
