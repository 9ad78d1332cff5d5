"""HMNR's forced-checkpoint rule (Hélary, Mostefaoui, Netzer, Raynal), as CheckMate runs it: pure logic.

Every process ``me`` of ``n`` keeps

  * ``lc``: a Lamport-like clock, one more at each of its checkpoints, the maximum seen otherwise;
  * ``ckpt[k]``: how many checkpoints process ``k`` has taken, as far as ``me`` knows;
  * ``taken[k]``: a Z-path that contains a checkpoint leads from ``k``'s last known checkpoint to
    ``me``'s next one;
  * ``greater[k]``: ``me``'s clock is greater than ``k``'s, as far as ``me`` knows;
  * ``sent_to[k]``: ``me`` sent to ``k`` since its last checkpoint (never piggybacked).

``lc``, ``ckpt``, ``taken`` and ``greater`` are piggybacked on every message (:class:`Piggyback`:
``8 + 10 n`` bytes).  On receipt, *before* the message is delivered, the receiver takes a
**forced checkpoint** when

  1. it sent to some ``k`` in this interval, the sender's clock exceeds its own and the sender's
     clock is greater than ``k``'s (a Z-path from ``k`` back to here could close a cycle through a
     checkpoint with a smaller clock), or
  2. the sender has seen every checkpoint of the receiver (``m.ckpt[me] == ckpt[me]``) and knows a
     Z-path from the receiver's current interval back through a checkpoint (``m.taken[me]``) —
     delivering the message would close a Z-cycle;

then it merges the piggyback (clock maximum, ``greater`` and ``taken`` as the newer knowledge
says).  Safety argument (HMNR's theorem): with these forced checkpoints no checkpoint lies on a
Z-cycle, so every checkpoint belongs to some consistent global state — none is *useless*, and
rollback propagation never dominoes.  The rule only ever adds checkpoints; which checkpoints a
recovery restores is still decided by the recovery line
(:func:`spark_integration.recovery_line.compute`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Piggyback:
    """What a message carries: the sender's ``lc``, ``ckpt``, ``taken`` and ``greater``."""

    lc: int
    ckpt: np.ndarray  # int64[n]
    taken: np.ndarray  # bool[n]
    greater: np.ndarray  # bool[n]

    def to_bytes(self) -> bytes:
        return (np.array([self.lc], "<i8").tobytes() + self.ckpt.astype("<i8").tobytes()
                + self.taken.astype(np.uint8).tobytes() + self.greater.astype(np.uint8).tobytes())

    @classmethod
    def from_bytes(cls, blob: bytes) -> "Piggyback":
        n = (len(blob) - 8) // 10
        lc = int(np.frombuffer(blob, "<i8", 1)[0])
        ckpt = np.frombuffer(blob, "<i8", n, 8).copy()
        taken = np.frombuffer(blob, np.uint8, n, 8 + 8 * n).astype(bool)
        greater = np.frombuffer(blob, np.uint8, n, 8 + 9 * n).astype(bool)
        return cls(lc, ckpt, taken, greater)


def piggyback_size(n: int) -> int:
    """Bytes one message carries among ``n`` processes."""
    return 8 + 10 * n


class Hmnr:
    """One process's HMNR bookkeeping (see the module doc)."""

    def __init__(self, n: int, me: int) -> None:
        self.n, self.me = n, me
        self.lc = 0
        self.ckpt = np.zeros(n, np.int64)
        self.taken = np.zeros(n, bool)
        self.greater = np.zeros(n, bool)
        self.sent_to = np.zeros(n, bool)
        self.forced = 0  # forced checkpoints taken so far
        self.basic = 0  # checkpoints taken on the process's own clock

    def _others(self) -> np.ndarray:
        mask = np.ones(self.n, bool)
        mask[self.me] = False
        return mask

    # -- events -------------------------------------------------------------------------------
    def checkpoint(self, forced: bool = False) -> None:
        """A checkpoint (basic or forced) starts a new interval."""
        others = self._others()
        self.sent_to[:] = False
        self.taken[others] = True
        self.greater[others] = True
        self.lc += 1
        self.ckpt[self.me] += 1
        if forced:
            self.forced += 1
        else:
            self.basic += 1

    def send(self, dest: int) -> Piggyback:
        """What a message to ``dest`` carries; remembers that ``me`` sent to it in this interval."""
        self.sent_to[dest] = True
        return Piggyback(self.lc, self.ckpt.copy(), self.taken.copy(), self.greater.copy())

    def must_force(self, m: Piggyback) -> bool:
        """Whether delivering ``m`` now needs a forced checkpoint first (the two conditions)."""
        z_cycle_by_clock = bool(np.any(self.sent_to & m.greater)) and m.lc > self.lc
        z_cycle_back = bool(m.ckpt[self.me] == self.ckpt[self.me] and m.taken[self.me])
        return z_cycle_by_clock or z_cycle_back

    def merge(self, m: Piggyback) -> None:
        """Take in ``m``'s knowledge (after any forced checkpoint)."""
        others = self._others()
        if m.lc > self.lc:
            self.lc = m.lc
            self.greater[self.me] = False
            self.greater[others] = m.greater[others]
        elif m.lc == self.lc:
            self.greater &= m.greater
        newer = others & (m.ckpt > self.ckpt)
        same = others & (m.ckpt == self.ckpt)
        self.ckpt[newer] = m.ckpt[newer]
        self.taken[newer] = m.taken[newer]
        self.taken[same] |= m.taken[same]

    def receive(self, m: Piggyback) -> bool:
        """Receipt of ``m``: a forced checkpoint if needed, then the merge; True if forced."""
        forced = self.must_force(m)
        if forced:
            self.checkpoint(forced=True)
        self.merge(m)
        return forced

    # -- persistence (the bookkeeping travels with the process's checkpoints) ------------------
    def to_bytes(self) -> bytes:
        head = np.array([self.n, self.me, self.lc, self.forced, self.basic], "<i8").tobytes()
        return (head + self.ckpt.astype("<i8").tobytes()
                + np.concatenate([self.taken, self.greater, self.sent_to]).astype(np.uint8).tobytes())

    @classmethod
    def from_bytes(cls, blob: bytes) -> "Hmnr":
        n, me, lc, forced, basic = (int(x) for x in np.frombuffer(blob, "<i8", 5))
        h = cls(n, me)
        h.lc, h.forced, h.basic = lc, forced, basic
        h.ckpt = np.frombuffer(blob, "<i8", n, 40).copy()
        flags = np.frombuffer(blob, np.uint8, 3 * n, 40 + 8 * n).astype(bool)
        h.taken, h.greater, h.sent_to = flags[:n].copy(), flags[n:2 * n].copy(), flags[2 * n:].copy()
        return h

    @staticmethod
    def size(n: int) -> int:
        """Bytes of :meth:`to_bytes` among ``n`` processes."""
        return 40 + 8 * n + 3 * n
