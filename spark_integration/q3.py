"""NexMark Q3 — persons ⋈ auctions on seller = person id — as keyed operator state.

    SELECT P.name, P.city, P.state, A.id
    FROM auction A, person P
    WHERE A.seller = P.id AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA') AND A.category = 10

Both filters run *before* the shuffle (:func:`select_partition`, like Flink's plan), so the
keyed stage sees only matching persons (keyed by their id) and category-10 auctions (keyed by
their seller), i.e. both sides of a seller meet on one instance. It is a symmetric hash join:
a person is kept forever (NexMark persons never leave), an auction whose seller has not arrived
waits for it; the join result of an auction is emitted once, when both sides are there.

State layout — why this way: the protocols checkpoint, log and restore a sparse map
``int64 slot -> int64 value`` with ``0 = absent`` (:class:`~.keyed_state.KeyedState`: dense arrays,
dirty bits, incremental checkpoints where a deletion is a changed slot holding 0). The join
state fits that map by interleaving four tables in the slot number, ``slot = 4 * id + table``:

    PERSON   (id = person id)   packed (name, city, state) + 1      -- persons seen, per seller key
    EMITTED  (id = person id)   number of join results emitted for this seller
    PENDING  (id = auction id)  seller + 1                            -- auctions waiting for it
    JOINED   (id = auction id)  seller + 1                            -- the emitted results

So every protocol and backend carries the join unchanged. ``JOINED`` + ``PERSON`` are the output
rows (:func:`results`); ``EMITTED`` is the exactly-once witness: a result emitted twice (an
Input Set applied twice after a recovery) shows as a count one too high, one lost as one too low.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from . import nexmark
from .keyed_state import KeyedState
from .source import generate

PERSON, EMITTED, PENDING, JOINED = range(4)
TABLES = 4
MARK = -1  # etype of the per-partition progress marker (see select_partition)

_STATE_CODES = np.array(nexmark.state_codes(nexmark.Q3_STATES), np.int64)


def slot(ids: np.ndarray, table: int) -> np.ndarray:
    return ids * TABLES + table


class JoinState(KeyedState):
    """The Q3 join's per-instance state (see the module docstring for the slots)."""

    __slots__ = ()
    COLUMNS = ("key", "etype", "id", "attr")

    def apply_columns(self, cols: list[np.ndarray]) -> None:
        key, etype, ids, attr = cols
        is_p, is_a = etype == nexmark.PERSON, etype == nexmark.AUCTION
        persons, pattrs = ids[is_p], attr[is_p]
        aids, sellers = ids[is_a], key[is_a]
        top = max(int(persons.max(initial=-1)), int(sellers.max(initial=-1)), int(aids.max(initial=-1)))
        if top < 0:
            return
        self._grow(TABLES * (top + 1))
        c, d = self.counts, self.dirty
        # 1. persons first, so an auction and its seller in the same batch meet here
        c[slot(persons, PERSON)] = pattrs + 1
        d[slot(persons, PERSON)] = True
        # 2. auctions: join with a known seller, or wait for it
        known = c[slot(sellers, PERSON)] != 0
        self._emit(aids[known], sellers[known])
        c[slot(aids[~known], PENDING)] = sellers[~known] + 1
        d[slot(aids[~known], PENDING)] = True
        # 3. earlier auctions that were waiting for one of these persons
        if len(persons):
            waiting = np.flatnonzero(c[PENDING::TABLES])
            if len(waiting):
                who = c[slot(waiting, PENDING)] - 1
                hit = np.isin(who, persons)
                c[slot(waiting[hit], PENDING)] = 0
                d[slot(waiting[hit], PENDING)] = True
                self._emit(waiting[hit], who[hit])

    def _emit(self, aids: np.ndarray, sellers: np.ndarray) -> None:
        """Output rows (auction, seller): recorded as JOINED, counted per seller in EMITTED."""
        if len(aids) == 0:
            return
        self.counts[slot(aids, JOINED)] = sellers + 1
        self.dirty[slot(aids, JOINED)] = True
        np.add.at(self.counts, slot(sellers, EMITTED), 1)
        self.dirty[slot(sellers, EMITTED)] = True


def results(slots: np.ndarray, values: np.ndarray) -> list[tuple[str, str, str, int]]:
    """Q3's output rows ``(name, city, state, auction id)`` from (merged) final state pairs."""
    person_attr = dict(zip((slots[slots % TABLES == PERSON] // TABLES).tolist(),
                           (values[slots % TABLES == PERSON] - 1).tolist()))
    joined = slots % TABLES == JOINED
    rows = []
    for aid, seller in zip((slots[joined] // TABLES).tolist(), (values[joined] - 1).tolist()):
        rows.append((*nexmark.person(person_attr[seller]), aid))
    return sorted(rows, key=lambda r: r[3])


# ------------------------------------------------------------------------ before the shuffle
def keep(etype: np.ndarray, attr: np.ndarray) -> np.ndarray:
    """Q3's filters: persons in OR/ID/CA, auctions of category 10 (bids are not needed)."""
    return (((etype == nexmark.PERSON) & np.isin(attr % len(nexmark.US_STATES), _STATE_CODES))
            | ((etype == nexmark.AUCTION) & (attr == nexmark.Q3_CATEGORY)))


def select_partition(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` body before the shuffle: the filtered events, then one progress marker.

    The marker (``etype = -1``, the partition's last offset) tells the driver how far the source
    got: a micro-batch's offset range is read off the keyed stage's min/max ``seq``, and without it
    a batch ending in filtered-out bids would look shorter than it is. The join ignores markers.
    """
    import pyarrow as pa

    last = -1
    schema = None
    for rb in batches:
        if rb.num_rows == 0:
            continue
        schema = rb.schema
        last = max(last, int(rb.column("seq").to_numpy().max()))
        mask = keep(rb.column("etype").to_numpy(), rb.column("attr").to_numpy())
        yield rb.filter(pa.array(mask))
    if last >= 0:
        marker = {"seq": [last], "key": [0], "etype": [MARK], "id": [0], "attr": [0]}
        yield pa.RecordBatch.from_pydict(marker, schema=schema)


# ---------------------------------------------------------------------------- ground truth
def ground_truth(seed: int, keys: int, skew: Any, events: int, chunk: int = 1 << 20) -> np.ndarray:
    """The final Q3 state of events ``[0, events)`` as a dense slot array, computed as a plain
    relational join over the whole input (no incremental operator, no Spark)."""
    p_ids, p_attr, a_ids, a_sellers = [], [], [], []
    for start in range(0, events, chunk):
        c = generate("nexmark", seed, keys, skew, start, min(events, start + chunk))
        k = keep(c["etype"], c["attr"])
        p = k & (c["etype"] == nexmark.PERSON)
        a = k & (c["etype"] == nexmark.AUCTION)
        p_ids.append(c["id"][p]); p_attr.append(c["attr"][p])  # noqa: E702
        a_ids.append(c["id"][a]); a_sellers.append(c["key"][a])  # noqa: E702
    persons, attrs = np.concatenate(p_ids), np.concatenate(p_attr)
    aids, sellers = np.concatenate(a_ids), np.concatenate(a_sellers)
    top = max(int(persons.max(initial=-1)), int(aids.max(initial=-1)), int(sellers.max(initial=-1)))
    out = np.zeros(TABLES * (top + 1), np.int64)
    out[slot(persons, PERSON)] = attrs + 1
    matched = np.isin(sellers, persons)
    out[slot(aids[matched], JOINED)] = sellers[matched] + 1
    out[slot(aids[~matched], PENDING)] = sellers[~matched] + 1
    np.add.at(out, slot(sellers[matched], EMITTED), 1)
    return out
