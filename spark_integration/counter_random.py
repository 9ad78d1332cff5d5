"""Counter-based random numbers: uniform floats as a pure function of ``(seed, stream, event number)``.

splitmix64's finalizer turns each pair into 64 well-mixed bits, vectorized with numpy, so any
range of events can be regenerated at any time and on any machine with the same draws — which is
what makes the sources replayable (:mod:`.source`, :mod:`.nexmark`) and the ground truth
computable without storing the input.  Distinct ``stream`` numbers give independent draws.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer over a uint64 array (wrapping arithmetic)."""
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def uniform(seed: int, stream: int, seq: np.ndarray) -> np.ndarray:
    """Uniform floats in [0, 1) for event numbers ``seq``; independent per ``(seed, stream)``."""
    salt = _mix(np.array([(seed * 1_000_003 + stream) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
    h = _mix(seq.astype(np.uint64) ^ salt)
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
