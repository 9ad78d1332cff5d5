"""NexMark Q1 (a stateless map), Q8 (a windowed join) and Q12 (a windowed count) as keyed jobs.

CheckMate runs NexMark Q1, Q3, Q8 and Q12; Q3 is :mod:`.q3`.  Each query here is a ``mapInArrow``
stage before the shuffle (the query's own logic: the map, the window assignment, the filter) plus
one of the existing keyed operator states, so every protocol and backend carries it unchanged, and
a ground truth computed from the input alone (no Spark, no operator code).

Windows are **tumbling windows over event numbers** (``WINDOW_EVENTS`` events each; CheckMate uses
processing-time windows): a replayed event falls into the same window, which exactly-once
verification needs.  Windows fold into the last one after ``MAX_WINDOWS`` (beyond
``WINDOW_EVENTS * MAX_WINDOWS`` events), and a window's state is kept after it closes (CheckMate's
running windows drop it at expiry) — checkpoints grow with the windows seen.

  * ``q1``: bids with their price converted (dollars -> euros, NexMark's ``0.908``); the map has no
    state, so the keyed stage is only the sink: it counts the rows it received per output channel
    (``seq % SINK_CHANNELS``), a state of ``SINK_CHANNELS`` slots in all.
  * ``q12``: bids counted per auction and window (slot ``auction * MAX_WINDOWS + window``).
    NexMark's Q12 counts per *bidder*; our generator skews auctions (``--skew``) and draws bidders
    uniformly, so grouping by auction is what lets a hot-item ratio reach the keyed stage.
  * ``q8``: persons ⋈ auctions on ``seller = person`` **within the same window** (NexMark Q8: new
    people who opened an auction in the window), as Q3's symmetric hash join
    (:class:`~.q3.JoinState`) on windowed ids: a person ``p`` in window ``w`` becomes id
    ``p * MAX_WINDOWS + w``, an auction's seller ``s`` in window ``w`` the key ``s * MAX_WINDOWS + w``.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from . import nexmark, q3
from .source import generate

WINDOW_EVENTS = 50_000
MAX_WINDOWS = 16
SINK_CHANNELS = 64
EUROS_PER_DOLLAR_MILLI = 908  # NexMark Q1: price * 0.908


def window(seq: np.ndarray) -> np.ndarray:
    """The tumbling window of each event number (see the module doc)."""
    return np.minimum(seq // WINDOW_EVENTS, MAX_WINDOWS - 1)


# --------------------------------------------------------------------------------- Q1
def q1_columns(seq: np.ndarray, price: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sink channel, euro price) of bids ``seq``."""
    return seq % SINK_CHANNELS, price * EUROS_PER_DOLLAR_MILLI // 1000


def q1_select(batches: Iterator[Any]) -> Iterator[Any]:
    """Q1's map on the ``bids`` stream: the price in euros, the row keyed by its sink channel."""
    import pyarrow as pa

    for rb in batches:
        key, euros = q1_columns(rb.column("seq").to_numpy(), rb.column("price").to_numpy())
        yield pa.RecordBatch.from_arrays([rb.column("seq"), pa.array(key), rb.column("bidder"), pa.array(euros)],
                                         names=rb.schema.names)


def q1_truth(seed: int, keys: int, skew: Any, events: int) -> np.ndarray:
    return np.bincount(np.arange(events, dtype=np.int64) % SINK_CHANNELS, minlength=SINK_CHANNELS)


# -------------------------------------------------------------------------------- Q12
def q12_key(seq: np.ndarray, auction: np.ndarray) -> np.ndarray:
    return auction * MAX_WINDOWS + window(seq)


def q12_select(batches: Iterator[Any]) -> Iterator[Any]:
    """Q12's window assignment on the ``bids`` stream: the key becomes (auction, window)."""
    import pyarrow as pa

    for rb in batches:
        key = q12_key(rb.column("seq").to_numpy(), rb.column("key").to_numpy())
        yield pa.RecordBatch.from_arrays([rb.column("seq"), pa.array(key), rb.column("bidder"), rb.column("price")],
                                         names=rb.schema.names)


def q12_truth(seed: int, keys: int, skew: Any, events: int, chunk: int = 1 << 20) -> np.ndarray:
    out = np.zeros(keys * MAX_WINDOWS, np.int64)
    for start in range(0, events, chunk):
        c = generate("bids", seed, keys, skew, start, min(events, start + chunk))
        bc = np.bincount(q12_key(c["seq"], c["key"]))
        if len(bc) > len(out):
            out = np.concatenate([out, np.zeros(len(bc) - len(out), np.int64)])
        out[: len(bc)] += bc
    return out


# --------------------------------------------------------------------------------- Q8
def q8_columns(c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Persons and auctions of NexMark events ``c`` with windowed ids (bids dropped)."""
    keep = (c["etype"] == nexmark.PERSON) | (c["etype"] == nexmark.AUCTION)
    seq, etype, key, ids, attr = (c[n][keep] for n in ("seq", "etype", "key", "id", "attr"))
    w = window(seq)
    is_p = etype == nexmark.PERSON
    key = key * MAX_WINDOWS + w  # a person's key is its id, an auction's its seller
    ids = np.where(is_p, key, ids)
    return {"seq": seq, "key": key, "etype": etype, "id": ids, "attr": attr}


def q8_select(batches: Iterator[Any]) -> Iterator[Any]:
    """Q8's window assignment and filter, then one progress marker (as :func:`.q3.select_partition`)."""
    import pyarrow as pa

    last, names = -1, None
    for rb in batches:
        if rb.num_rows == 0:
            continue
        names = rb.schema.names
        cols = {n: rb.column(n).to_numpy() for n in names}
        last = max(last, int(cols["seq"].max()))
        out = q8_columns(cols)
        yield pa.RecordBatch.from_arrays([pa.array(out[n]) for n in names], names=names)
    if last >= 0:
        yield pa.RecordBatch.from_arrays([pa.array([last]), pa.array([0]), pa.array([q3.MARK]), pa.array([0]),
                                          pa.array([0])], names=names)


def q8_truth(seed: int, keys: int, skew: Any, events: int, chunk: int = 1 << 20) -> np.ndarray:
    """The final Q8 join state, as a relational join over the whole input (cf. :func:`.q3.ground_truth`)."""
    p_ids, p_attr, a_ids, a_sellers = [], [], [], []
    for start in range(0, events, chunk):
        c = q8_columns(generate("nexmark", seed, keys, skew, start, min(events, start + chunk)))
        p, a = c["etype"] == nexmark.PERSON, c["etype"] == nexmark.AUCTION
        p_ids.append(c["id"][p]); p_attr.append(c["attr"][p])  # noqa: E702
        a_ids.append(c["id"][a]); a_sellers.append(c["key"][a])  # noqa: E702
    persons, attrs = np.concatenate(p_ids), np.concatenate(p_attr)
    aids, sellers = np.concatenate(a_ids), np.concatenate(a_sellers)
    top = max(int(persons.max(initial=-1)), int(aids.max(initial=-1)), int(sellers.max(initial=-1)))
    out = np.zeros(q3.TABLES * (top + 1), np.int64)
    out[q3.slot(persons, q3.PERSON)] = attrs + 1
    matched = np.isin(sellers, persons)
    out[q3.slot(aids[matched], q3.JOINED)] = sellers[matched] + 1
    out[q3.slot(aids[~matched], q3.PENDING)] = sellers[~matched] + 1
    np.add.at(out, q3.slot(sellers[matched], q3.EMITTED), 1)
    return out
