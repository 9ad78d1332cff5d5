"""The audit's writer and its bookkeeping: what was acknowledged, and the check after a cut.

The writer is a child process (``python -m experiments.audit.writer CONFIG``): it opens the store
and runs writer threads, each on its own keys (so a key has at most one write in flight),
overwriting them with values of varying length and now and then deleting one.  Each operation
is announced on stdout before it starts (``S P key seed length``, ``S D key``) and once it
returned (``A ...``); the lines reach the parent through a pipe, never through the store's file
system.  Values are rebuilt from their seed (:func:`value_of`), so the pipe carries only names.

:class:`Model` folds those lines in and checks a reopened store against them: a key must hold
its last acknowledged state, or the value of the write in flight at the cut.  Anything else is
**lost** (an older acknowledged state: absent, an older value, a deleted key back) or **wrong**
(a value never written to that key); the model then adopts what it found, so a loss is counted
once.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from backends import CkptError, failpoints, open_backend


class WriterError(CkptError):
    """The writer child did not start."""


#: a value put through ``put_many`` as a byte view (a checkpoint's piece): a store's batch path,
#: which for indexed_fs writes a value this long from its own buffer (a gather write)
LARGE = 70_000

def value_of(seed: str, length: int) -> bytes:
    """The value written under ``seed``: rebuilt by the checker from the seed alone."""
    block = hashlib.sha256(seed.encode()).digest()
    return (block * (length // len(block) + 1))[:length]


# ----------------------------------------------------------------------------------- the writer
def writer_main(config: dict[str, Any]) -> None:
    """The writer child: write until killed (or until a fail point ends the process).  A store
    that does not open ends it at once with the error's one line on stderr (exit 2), which
    :meth:`Writer.wait_ready` passes on."""
    try:
        store = open_backend(config["backend"], **config["options"])
    except CkptError as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(2)
    counts_compactions = "compactions" in store.stats()
    if counts_compactions:  # the store compacts: the model reports its count, 0 included
        sys.stdout.write(f"C {store.stats()['compactions']}\n")
    out_lock = threading.Lock()
    failed = threading.Event()

    def say(line: str) -> None:
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def writer(t: int) -> None:
        rnd = random.Random(f"{config['seed']}-{t}")
        try:
            for i in range(10**9):
                key = f"t{t}-k{rnd.randrange(config['keys_per_thread'])}"
                if rnd.random() < 0.1:
                    say(f"S D {key}")
                    store.delete(key)
                    say(f"A D {key}")
                else:
                    vseed, length = f"{config['seed']}-{t}-{i}", rnd.choice((10, 300, 1500, 5000, LARGE))
                    say(f"S P {key} {vseed} {length}")
                    if length == LARGE:  # a batch's path: a large value goes as the batch writes it
                        store.put_many([(key, memoryview(value_of(vseed, length)))])
                    else:
                        store.put(key, value_of(vseed, length))
                    say(f"A P {key} {vseed} {length}")
                if counts_compactions and t == 0 and i % 50 == 49:
                    say(f"C {store.stats()['compactions']}")
        except BaseException as exc:  # noqa: BLE001 - the cut: stop writing, never acknowledge
            say(f"E {type(exc).__name__}")
            failed.set()

    say("READY")
    threads = [threading.Thread(target=writer, args=(t,), daemon=True)
               for t in range(config["threads"])]
    for th in threads:
        th.start()
    while not failed.is_set():
        time.sleep(0.5)
    while True:  # keep the store open, unclosed, until the parent kills us
        time.sleep(3600)


# ------------------------------------------------------------------------------------ the model
class Model:
    """What the writers acknowledged (key -> latest value, ``None``: deleted), what was in flight
    at the cut, and every value ever written to each key (to tell lost from wrong)."""

    def __init__(self) -> None:
        self.acked: dict[str, bytes | None] = {}
        self.pending: dict[str, bytes | None] = {}
        self.history: dict[str, set[bytes | None]] = {}
        self.total_acked = 0
        #: the most compactions a writer reported (None: the store does not compact)
        self.compactions: int | None = None
        self.lost = 0
        self.wrong = 0
        self.failures: list[str] = []

    def read(self, lines: Iterable[str]) -> int:
        """Fold one round's lines in; returns how many writes the round acknowledged."""
        self.pending = {}
        acked = 0
        for line in lines:
            parts = line.split()
            if not line.endswith("\n"):
                continue  # a line cut by the kill: its op is still pending
            if parts[:1] == ["C"]:
                self.compactions = max(self.compactions or 0, int(parts[1]))
                continue
            if len(parts) < 3 or parts[0] not in ("S", "A"):
                continue
            kind, op, key = parts[:3]
            val = value_of(parts[3], int(parts[4])) if op == "P" else None
            self.history.setdefault(key, {None}).add(val)
            if kind == "S":
                self.pending[key] = val
            else:
                self.acked[key] = val
                self.pending.pop(key, None)
                acked += 1
        self.total_acked += acked
        return acked

    def check(self, found: dict[str, bytes | None], round_no: int) -> tuple[int, int]:
        """Compare what a reopened store holds (``found``: every key of the model) with what was
        acknowledged; count and adopt the differences.  Returns (lost, wrong) of this round."""
        lost = wrong = 0
        for key in sorted(set(self.acked) | set(self.pending)):
            got = found.get(key)
            allowed = [self.acked.get(key)]
            if key in self.pending:
                allowed.append(self.pending[key])
            if got in allowed:
                self.acked[key] = got
                continue
            if got in self.history.get(key, {None}):
                lost += 1
                what = "lost"
            else:
                wrong += 1
                what = "wrong"
            if len(self.failures) < 20:
                self.failures.append(
                    f"round {round_no}: {key} {what}: holds {_brief(got)}, acknowledged "
                    f"{_brief(self.acked.get(key))}"
                    + (f" (in flight: {_brief(self.pending[key])})" if key in self.pending else ""))
            self.acked[key] = got
            self.history.setdefault(key, {None}).add(got)
        self.lost += lost
        self.wrong += wrong
        self.pending = {}
        return lost, wrong

    def keys(self) -> list[str]:
        return sorted(set(self.acked) | set(self.pending))


def _brief(value: bytes | None) -> str:
    return "nothing" if value is None else f"{len(value)} bytes {value[:6].hex()}"



class Writer:
    """One writer child with a thread that collects its lines."""

    def __init__(self, config: dict[str, Any], failpoint: str | None) -> None:
        env = {k: v for k, v in os.environ.items() if k != failpoints.ENV}
        if failpoint:
            env[failpoints.ENV] = failpoint
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "experiments.audit.writer", json.dumps(config)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root)
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.started = time.monotonic()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            if line.strip() == "READY":
                self.ready.set()
            else:
                self.lines.append(line)

    def wait_ready(self, timeout: float) -> None:
        """Wait for ``READY``; a writer that exits first fails at once with its last line."""
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.1):
            if self.proc.poll() is not None:
                self.reader.join(5)
                if self.ready.is_set():
                    return
                last = (self.stderr().splitlines() or ["(no output)"])[-1]
                raise WriterError(f"the writer exited with {self.proc.returncode} before it "
                                  f"started: {last}")
            if time.monotonic() > deadline:
                self.kill()
                last = (self.stderr().splitlines() or ["(no output)"])[-1]
                raise WriterError(f"the writer did not start in {timeout:.0f} s: {last}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.reader.join(30)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return (self.proc.stderr.read() or "").strip()[-1500:]  # type: ignore[union-attr]



if __name__ == "__main__":
    writer_main(json.loads(sys.argv[1]))
