"""Recovery-line computation for uncoordinated checkpoints (pure logic)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_integration.recovery_line import Checkpoint, checkpoint_graph, compute, orphans

A, B = 0, 1


def test_no_orphan_keeps_latest_and_replays_in_flight():
    ckpts = {A: [Checkpoint(A, 1, sent={B: 5})], B: [Checkpoint(B, 1, processed={A: 3})]}
    r = compute(ckpts)
    assert r.line == {A: 1, B: 1} and r.useless_count == 0 and not r.domino
    assert r.replay == {(A, B): (3, 5)}  # messages 4..5 were in flight at the line


def test_orphan_rolls_the_receiver_back():
    ckpts = {
        A: [Checkpoint(A, 1, sent={B: 5})],
        B: [Checkpoint(B, 1, processed={A: 3}), Checkpoint(B, 2, processed={A: 8})],
    }
    assert orphans(ckpts, {A: 1, B: 2}) == [(A, B)]
    r = compute(ckpts)
    assert r.line == {A: 1, B: 1} and r.useless == {A: [], B: [2]}
    assert orphans(ckpts, r.line) == []


def test_domino_effect_rolls_everything_to_the_start():
    ckpts = {
        A: [Checkpoint(A, 1, sent={B: 1}, processed={B: 1}), Checkpoint(A, 2, sent={B: 3}, processed={B: 3})],
        B: [Checkpoint(B, 1, sent={A: 2}, processed={A: 2}), Checkpoint(B, 2, sent={A: 4}, processed={A: 4})],
    }
    r = compute(ckpts)
    assert r.domino and r.line == {A: 0, B: 0} and r.useless_count == 4
    assert r.replay == {}  # nothing was sent before the initial states


def test_graph_has_message_and_successor_edges():
    ckpts = {
        A: [Checkpoint(A, 1, sent={B: 5})],
        B: [Checkpoint(B, 1, processed={A: 3}), Checkpoint(B, 2, processed={A: 8})],
    }
    edges = checkpoint_graph(ckpts)
    assert ((B, 1), (B, 2)) in edges and ((A, 1), (B, 2)) in edges  # message 6..8 sent after A1
    assert ((A, 1), (B, 1)) not in edges


@st.composite
def histories(draw):
    n = draw(st.integers(2, 3))
    out = {}
    for i in range(n):
        k = draw(st.integers(0, 3))
        sent = {j: sorted(draw(st.lists(st.integers(0, 9), min_size=k, max_size=k))) for j in range(n) if j != i}
        got = {j: sorted(draw(st.lists(st.integers(0, 9), min_size=k, max_size=k))) for j in range(n) if j != i}
        out[i] = [Checkpoint(i, x + 1, {j: s[x] for j, s in sent.items()}, {j: g[x] for j, g in got.items()})
                  for x in range(k)]
    return out


@settings(max_examples=300, deadline=None)
@given(histories())
def test_line_is_the_latest_consistent_one(ckpts):
    r = compute(ckpts)
    assert orphans(ckpts, r.line) == []
    # brute force: every consistent line is componentwise <= ours (ours is the maximum)
    choices = [[0] + [c.index for c in ckpts[i]] for i in sorted(ckpts)]
    for combo in itertools.product(*choices):
        line = dict(zip(sorted(ckpts), combo))
        if not orphans(ckpts, line):
            assert all(line[i] <= r.line[i] for i in line)


# -- the uncoordinated Spark protocol's use of it ------------------------------------------------
def test_protocol_line_is_the_latest_checkpoint_and_replays_each_channel_after_it():
    from spark_integration.protocols.uncoordinated.recovery import line_for, sender_id as _sender_id

    rl = line_for(2, [3, 5], senders=2, logged=6)
    assert rl.line[2] == 5 and rl.useless_count == 0 and not rl.domino
    assert rl.replay == {(_sender_id(0), 2): (5, 6), (_sender_id(1), 2): (5, 6)}


def test_protocol_line_rolls_back_past_an_orphan_checkpoint_and_counts_it_useless():
    """A checkpoint claiming micro-batch 7 when the senders logged only up to 6 (a zombie's write
    from a partial input) would hold an orphan: the line rolls back to 3 and replays 4..6."""
    from spark_integration.protocols.uncoordinated.recovery import line_for, sender_id as _sender_id

    rl = line_for(2, [3, 7], senders=2, logged=6)
    assert rl.line[2] == 3 and rl.useless == {2: [7], _sender_id(0): [], _sender_id(1): []}
    assert rl.useless_count == 1 and rl.replay[(_sender_id(0), 2)] == (3, 6)


def test_protocol_line_without_checkpoints_replays_everything_logged():
    from spark_integration.protocols.uncoordinated.recovery import line_for, sender_id as _sender_id

    rl = line_for(0, [], senders=1, logged=4)
    assert rl.line[0] == 0 and rl.replay == {(_sender_id(0), 0): (0, 4)}


def test_instance_schedule_staggers_and_jitters_each_instance_on_its_own_clock():
    from spark_integration.protocols.uncoordinated.schedule import InstanceSchedule

    plain = InstanceSchedule(4)
    assert [b for b in range(1, 13) if plain.due(1, b)] == [3, 7, 11]  # staggered by the instance
    sched = InstanceSchedule(6, 2, "job-a")
    for inst in range(4):
        due = [b for b in range(1, 600) if sched.due(inst, b)]
        gaps = [b - a for a, b in zip(due, due[1:])]
        assert 6 - 4 <= min(gaps) and max(gaps) <= 6 + 4  # interval +- 2 jitter at each end
        assert len(set(gaps)) > 1  # really jittered
        assert due == [b for b in range(1, 600) if InstanceSchedule(6, 2, "job-a").due(inst, b)]
    other = [b for b in range(1, 600) if InstanceSchedule(6, 2, "job-b").due(0, b)]
    assert other != [b for b in range(1, 600) if sched.due(0, b)]  # a pseudo-random clock per job
