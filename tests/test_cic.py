"""CIC's forced-checkpoint rule (HMNR, as CheckMate runs it) on known message sequences: pure logic.

A sequence of sends, receipts and basic checkpoints is played on :class:`Hmnr` processes; the
tests check when the rule forces a checkpoint, that its piggybacks and bookkeeping round-trip,
and — with the recovery line of :mod:`spark_integration.recovery_line` — that the forced
checkpoints leave no useless checkpoint where uncoordinated checkpoints of the same run have one.
"""

from __future__ import annotations

import numpy as np
import pytest

from spark_integration.protocols.cic.hmnr import Hmnr, Piggyback, piggyback_size
from spark_integration.sized_state import sized_count_state
from backends import open_backend
from spark_integration.conf import PREFIX, from_conf
from spark_integration.layouts.registry import layout_for, layout_names
from spark_integration.protocols.cic.protocol import bookkeeping_of, checkpoint_of, sender_piggyback
from spark_integration.keyed_state import KeyedState
from spark_integration.store import Scoped
from spark_integration.recovery_line import Checkpoint, compute


def procs(n: int) -> list[Hmnr]:
    return [Hmnr(n, i) for i in range(n)]


def test_stateless_senders_never_force():
    # the Spark job's topology: senders that never checkpoint -> instances that never send
    n = 4  # senders 2, 3; instances 0, 1
    inst = procs(n)[:2]
    for _round in range(5):
        for i in inst:
            for s in (2, 3):
                assert not i.receive(Piggyback.from_bytes(sender_piggyback(2, s - 2)))
            i.checkpoint()
    assert [i.forced for i in inst] == [0, 0]
    assert [i.basic for i in inst] == [5, 5]


def test_forced_when_a_z_path_returns_through_a_checkpoint():
    # p0 checkpoints, then sends m to p1, which has not checkpointed since p0 last heard of it:
    # m.ckpt[1] == ckpt[1] and m.taken[1] -> condition 2 forces p1
    p0, p1 = procs(2)
    p0.checkpoint()
    m = p0.send(1)
    assert p1.must_force(m)
    assert p1.receive(m)
    assert (p1.forced, p1.ckpt[1], p1.lc) == (1, 1, 1)


def test_no_force_when_receiver_checkpointed_since_sender_heard():
    p0, p1 = procs(2)
    p1.checkpoint()  # p0 has not heard of it: m.ckpt[1] = 0 != 1
    p0.checkpoint()
    assert not p1.receive(p0.send(1))
    assert p1.forced == 0


def test_forced_by_clock_after_sending_in_the_interval():
    # condition 1 alone: p1 sent to p0 in its interval; p2's clock is ahead of p1's and p2 knows
    # its clock is greater than p0's -> p1 must checkpoint before delivering p2's message
    p0, p1, p2 = procs(3)
    p1.checkpoint()
    p1.send(0)
    p2.checkpoint()
    p2.checkpoint()
    m = p2.send(1)
    assert m.ckpt[1] != p1.ckpt[1]  # condition 2 cannot hold
    assert p1.must_force(m)
    # the same message without the send: no Z-path can close through p0
    q1 = Hmnr(3, 1)
    q1.checkpoint()
    assert not q1.must_force(m)


def test_merge_takes_the_newer_knowledge():
    p0, p1 = procs(2)
    p0.checkpoint()
    p0.checkpoint()
    p1.checkpoint()
    p1.merge(p0.send(1))
    assert p1.lc == 2 and p1.ckpt[0] == 2 and not p1.greater[1]


def test_piggyback_and_bookkeeping_round_trip():
    p = Hmnr(6, 2)
    p.checkpoint()
    p.send(4)
    m = p.send(5)
    blob = m.to_bytes()
    assert len(blob) == piggyback_size(6)
    back = Piggyback.from_bytes(blob)
    assert back.lc == m.lc and np.array_equal(back.ckpt, m.ckpt)
    assert np.array_equal(back.taken, m.taken) and np.array_equal(back.greater, m.greater)
    q = Hmnr.from_bytes(p.to_bytes())
    assert (q.n, q.me, q.lc, q.basic) == (6, 2, 1, 1) and np.array_equal(q.sent_to, p.sent_to)
    assert len(p.to_bytes()) == Hmnr.size(6)


@pytest.mark.parametrize("layout", layout_names())
@pytest.mark.parametrize("size", ["0", "64"])
def test_checkpoint_carries_state_and_bookkeeping(layout, size):
    settings = from_conf({PREFIX + "layout": layout})
    cls = sized_count_state(size) if size != "0" else KeyedState
    state = cls()
    state.apply_columns([np.array([3, 3, 7]), np.array([10, 11, 12])][:len(cls.COLUMNS)])
    h = Hmnr(4, 1)
    h.checkpoint()
    store = Scoped(open_backend("memory"), "")
    layout_for(settings).write(store, "c0000000001", checkpoint_of(settings, state, h))
    manifest = layout_for(settings).find(store, "c0000000001")
    back = cls()
    layout_for(settings).load(store, manifest, back)
    assert back.encode() == state.encode() and back.counts[[3, 7]].tolist() == [2, 1]
    assert bookkeeping_of(manifest).lc == 1


def _play(protocol: str) -> tuple[dict[int, list[Checkpoint]], int]:
    """Two processes in a cycle: p0 checkpoints, p1 sends m1 to p0, p0 sends m2 to p1, p1
    checkpoints after m2 arrived, and p0's receipt of m1 comes after its checkpoint only.  Under
    plain uncoordinated checkpoints p1's checkpoint processed m2, sent after p0's checkpoint,
    while p0's checkpoint did not see m1 either way; with HMNR p1 is forced before m2."""
    p0, p1 = procs(2)
    ckpts: dict[int, list[Checkpoint]] = {0: [], 1: []}
    sent = {0: 0, 1: 0}
    got = {0: 0, 1: 0}
    forced = 0

    def take(i: int, h: Hmnr) -> None:
        ckpts[i].append(Checkpoint(i, len(ckpts[i]) + 1, sent={1 - i: sent[i]}, processed={1 - i: got[i]}))

    p0.checkpoint()
    take(0, p0)
    m1 = p1.send(0)  # p1 -> p0, seq 1
    sent[1] = 1
    m2 = p0.send(1)  # p0 -> p1, seq 1, after p0's checkpoint
    sent[0] = 1
    if protocol == "cic" and p1.receive(m2):
        forced += 1
        take(1, p1)
    got[1] = 1
    p1.checkpoint()
    take(1, p1)  # p1's basic checkpoint: processed m2, which p0's checkpoint has not sent
    if protocol == "cic":
        p0.receive(m1)
    got[0] = 1
    return ckpts, forced


def test_cic_forced_checkpoint_keeps_a_newer_line_than_uncoordinated():
    # p0 fails: the line must use p0's checkpoint (sent 0), so p1's last checkpoint (processed
    # m2) is an orphan and useless in both; CIC's forced one keeps p1's rollback short
    unc, _ = _play("unc")
    cic, forced = _play("cic")
    assert forced == 1
    # only p0 restarts from its checkpoint; p1's checkpoints are candidates
    line_unc = compute({0: unc[0], 1: unc[1]})
    line_cic = compute({0: cic[0], 1: cic[1]})
    assert line_unc.line == {0: 1, 1: 0}  # p1 falls back to its initial state
    assert line_cic.line[1] >= 1  # the forced checkpoint (taken before m2) is on the line
    assert line_cic.line[0] == 1


def test_cyclic_query_emulation_cic_forces_checkpoints_and_rolls_back_less():
    # reachability through the message log: the same message pattern under both protocols
    from spark_integration.cyclic import compare, simulate

    unc, cic = simulate("uncoordinated", 5, seed=3), simulate("cic", 5, seed=3)
    assert unc.messages == cic.messages and unc.basic == cic.basic
    assert unc.forced == 0 and cic.forced > 0 and cic.piggybacked_bytes > 0
    means = compare(10, 5)
    assert means["cic"]["useless"] <= means["uncoordinated"]["useless"]
    assert means["cic"]["rollback_batches"] <= means["uncoordinated"]["rollback_batches"]
    assert means["cic"]["message_bytes_ratio"] > 1.5
