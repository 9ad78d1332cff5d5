"""NexMark's mixed stream of persons, auctions and bids, as a pure function of the event number.

The layout follows NexMark's generator (Beam/Flink ``GeneratorConfig`` defaults): out of every 50
events, number 0 is a new **person**, 1-3 are new **auctions**, 4-49 are **bids**. So ids need
no state: person ``i // 50``; auction ``3 * (i // 50) + (i % 50 - 1)``. References to other
entities are drawn like NexMark draws them: an auction's *seller* among the ``keys`` most recent
persons or, with NexMark's odds ``PERSON_LEAD / (keys + PERSON_LEAD)``, one of the ``PERSON_LEAD``
persons not created yet (NexMark's ``PERSON_ID_LEAD``: such an auction waits for its seller); a
bid's auction likewise among the ``keys`` most recent auctions (or ``AUCTION_LEAD`` ahead). Which
recent id is chosen follows ``--skew`` (:mod:`.skew`), rank 0 being the newest; with ``hot:F`` the
hot set is the newest ``N`` ids. ``--keys`` is thus NexMark's number of *active* people/auctions.

One flat schema serves the three types (``etype`` says which), so one source, one shuffle and
one log format carry them::

    seq long, key long, etype long, id long, attr long
    person  (etype 0): key = id = person id,  attr = packed (name, city, state) -> :func:`person`
    auction (etype 1): key = seller,  id = auction id,  attr = category (10..14)
    bid     (etype 2): key = auction, id = bidder,      attr = price

``key`` is the column the keyed stage partitions on: persons by their id and auctions by their
seller meet on the same instance, which is what Q3's join needs.
"""

from __future__ import annotations

import numpy as np

from .counter_random import uniform
from .skew import ranks

PERSON, AUCTION, BID = 0, 1, 2
PROPORTION = 50  # per 50 events: 1 person, 3 auctions, 46 bids
AUCTIONS_PER_BLOCK = 3
PERSON_LEAD = 10
AUCTION_LEAD = 10
FIRST_CATEGORY = 10
CATEGORIES = 5

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
             "Seattle", "Kent", "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")

SCHEMA = "seq long, key long, etype long, id long, attr long"

#: Q3's filters: sellers living in these states, auctions of this category
Q3_STATES = ("OR", "ID", "CA")
Q3_CATEGORY = 10


def person(attr: int) -> tuple[str, str, str]:
    """(name, city, state) of a person's packed ``attr``."""
    rest, state = divmod(int(attr), len(US_STATES))
    name, city = divmod(rest, len(US_CITIES))
    first, last = divmod(name, len(LAST_NAMES))
    return f"{FIRST_NAMES[first]} {LAST_NAMES[last]}", US_CITIES[city], US_STATES[state]


def state_codes(states: tuple[str, ...]) -> list[int]:
    """``attr % len(US_STATES)`` values of persons living in ``states`` (for filters)."""
    return [US_STATES.index(s) for s in states]


def _pick(newest: np.ndarray, rank: np.ndarray, ahead: np.ndarray, lead: int) -> np.ndarray:
    """Id ``newest - rank`` (rank 0 = the newest id; while fewer than ``keys`` ids exist the ranks
    wrap onto those that do), or for the events flagged ``ahead`` one of the ``lead`` ids not
    created yet (``rank % lead + 1`` ahead of the newest)."""
    past = newest - rank % (newest + 1)
    return np.where(ahead, newest + 1 + rank % lead, past)


def generate(seed: int, keys: int, skew, seq: np.ndarray) -> dict[str, np.ndarray]:
    """The columns of NexMark events ``seq`` (see the module docstring)."""
    block, pos = np.divmod(seq, PROPORTION)
    etype = np.where(pos == 0, PERSON, np.where(pos <= AUCTIONS_PER_BLOCK, AUCTION, BID)).astype(np.int64)
    u, v, w = uniform(seed, 11, seq), uniform(seed, 12, seq), uniform(seed, 13, seq)
    pick = ranks(skew, keys, u, v)
    # like NexMark's uniform draw over ``keys + lead`` ids: lead/(keys + lead) of them lie ahead
    x = uniform(seed, 15, seq)

    # persons: packed (name, city, state), each drawn independently like NexMark does
    names = len(FIRST_NAMES) * len(LAST_NAMES)
    name = (u * names).astype(np.int64)
    city = (v * len(US_CITIES)).astype(np.int64)
    state = (w * len(US_STATES)).astype(np.int64)
    packed = (name * len(US_CITIES) + city) * len(US_STATES) + state

    seller = _pick(block, pick, x * (keys + PERSON_LEAD) < PERSON_LEAD, PERSON_LEAD)
    auction_id = AUCTIONS_PER_BLOCK * block + np.maximum(pos - 1, 0)
    category = FIRST_CATEGORY + (w * CATEGORIES).astype(np.int64)

    newest_auction = AUCTIONS_PER_BLOCK * block + AUCTIONS_PER_BLOCK - 1
    bid_auction = _pick(newest_auction, pick, x * (keys + AUCTION_LEAD) < AUCTION_LEAD, AUCTION_LEAD)
    bidder = _pick(block, (uniform(seed, 14, seq) * keys).astype(np.int64), np.zeros(len(seq), bool), 1)
    price = (np.exp(w * 9.2)).astype(np.int64) + 1

    is_p, is_a = etype == PERSON, etype == AUCTION
    return {
        "seq": seq,
        "key": np.where(is_p, block, np.where(is_a, seller, bid_auction)),
        "etype": etype,
        "id": np.where(is_p, block, np.where(is_a, auction_id, bidder)),
        "attr": np.where(is_p, packed, np.where(is_a, category, price)),
    }
