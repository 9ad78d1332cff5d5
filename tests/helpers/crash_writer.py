"""Child process for tests/test_crash.py: write to a store until SIGKILLed.

Usage: crash_writer.py PATH SEED BACKEND [OPTION=VALUE ...]

The store is ``BACKEND`` opened on ``PATH`` with the given options.  Several writer threads (disjoint key sets, so each key has at most one write in flight) use
durability=sync.  Each operation is announced on stdout before it starts (``S``) and again once
acknowledged (``A``)::

    S P <key> <value-seed> <length>     S D <key>
    A P <key> <value-seed> <length>     A D <key>

and now and then ``C <compactions so far>`` (for a store whose stats count compactions).  The parent rebuilds every value from its seed with
:func:`value_of`.
"""

from __future__ import annotations

import hashlib
import random
import sys
import threading
from pathlib import Path

THREADS = 3
KEYS_PER_THREAD = 15


def value_of(seed: str, length: int) -> bytes:
    block = hashlib.sha256(seed.encode()).digest()
    return (block * (length // len(block) + 1))[:length]


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from backends import open_backend, parse_kv

    path, seed, backend = sys.argv[1:4]
    store = open_backend(backend, path=path, durability="sync", **parse_kv(sys.argv[4:]))
    counts_compactions = "compactions" in store.stats()
    out_lock = threading.Lock()

    def say(line: str) -> None:
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def writer(t: int) -> None:
        rnd = random.Random(f"{seed}-{t}")
        for i in range(10**9):
            key = f"t{t}-k{rnd.randrange(KEYS_PER_THREAD)}"
            if rnd.random() < 0.1:
                say(f"S D {key}")
                store.delete(key)
                say(f"A D {key}")
            else:
                vseed, length = f"{seed}-{t}-{i}", rnd.choice((10, 300, 1500, 5000))
                say(f"S P {key} {vseed} {length}")
                store.put(key, value_of(vseed, length))
                say(f"A P {key} {vseed} {length}")
            if counts_compactions and t == 0 and i % 50 == 49:
                say(f"C {store.stats()['compactions']}")  # lets the parent see compaction ran

    say("READY")
    threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


if __name__ == "__main__":
    main()
