"""One way to crash a store on purpose: do some work in a child process, then SIGKILL it.

Every crash experiment (``bench recovery --crash``, ``bench checkpoint --crash-recover``, the
thesis' rebuild-after-crash figure, storage-compare's recovery rows) needs the same thing: a
process that opens a store, writes, reports what it acknowledged, and then dies *without* closing
the store, so no index snapshot, no clean unlock and no final flush happen.  :func:`run_then_kill`
is that mechanism for every experiment that kills *after* the work returned.  Killing *during*
the work, at random instants or at fail points, and checking every acknowledged write afterwards
is :mod:`experiments.audit.runner` (``bench audit``, the crash tests), which also cuts the power.

Why a spawned child rather than a forked one: the parent may already hold client libraries'
threads (nfs-rs, redis pools, the store's sync thread), which do not survive a fork.  Why SIGKILL:
it cannot be caught, so nothing in the child gets to clean up, exactly like a crashed process.  A
SIGKILL keeps the page cache, so this models a process crash, not a power cut.

The child's work is any module-level function (spawn pickles it by name); its return value must be
picklable and is handed back to the parent, which kills the child only after receiving it, so
everything the work acknowledged before returning is what the crash must preserve.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable

from backends import CkptError, open_backend
from workloads import core, runner

#: how often (seconds) the parent looks at a working child: ``tick`` and the deadline
TICK = 0.2


def _child(conn: Any, work: Callable[..., Any], args: tuple) -> None:
    """Run ``work(*args)``, send its result, then wait to be killed with everything still open."""
    try:
        result = work(*args)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one message
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ok", result))
    while True:  # the parent SIGKILLs us here
        time.sleep(3600)


def run_then_kill(work: Callable[..., Any], *args: Any, what: str, timeout: float = 1800.0,
                  tick: Callable[[], None] | None = None) -> Any:
    """Run ``work(*args)`` in a spawned child, SIGKILL the child once it has returned, and return
    what it returned.  ``what`` names the work in errors ("loading 1000 keys into indexed_fs");
    ``tick()`` is called a few times a second while the child works (a progress bar's
    reading of a counter the child updates)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child_end, work, args), daemon=True)
    proc.start()
    child_end.close()
    try:
        deadline = time.monotonic() + timeout
        while not parent.poll(min(TICK, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                raise CkptError(f"{what} took more than {timeout:.0f} s")
            if tick is not None:
                tick()
        status, payload = parent.recv()
    except EOFError:
        status, payload = "error", f"the child died (exit code {proc.exitcode})"
    finally:
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
        proc.join()
    if status != "ok":
        raise CkptError(f"{what} before the crash failed: {payload}")
    return payload


# ------------------------------------------------------------------------ the common crash work
@dataclass(frozen=True)
class LoadedKeys:
    """What a crash-load acknowledged: how many keys, and how long the load took."""

    keys: int
    load_ms: float


def load_keys(backend: str, options: dict[str, Any], records: int, value_size: int, seed: int,
              batch: int, flush: bool, done: Any = None) -> LoadedKeys:
    """Child work: load ``records`` keys with the deterministic values of
    :func:`workloads.core.deterministic_value` (so the parent can verify them without being
    sent them), optionally ``flush`` the store, and report.  ``done``: a shared counter
    (``multiprocessing.Value``) kept at the number of keys written, for the parent's bar."""
    store = open_backend(backend, **options)
    spec = core.WorkloadSpec(name="crash-load", records=max(1, records), operations=0, read=1.0,
                             update=0.0, value_size=value_size)

    def count(n: int) -> None:
        done.value = n

    result = runner.load(store, core.CoreWorkload(spec, seed=seed), batch=batch,
                         value_for=lambda key: core.deterministic_value(key, value_size, seed),
                         progress=None if done is None else count)
    if result.errors:
        raise CkptError(f"load failed: {next(iter(result.errors))}")
    if flush:
        store.flush()
    return LoadedKeys(result.keys, result.runtime_ms)


def load_then_kill(backend: str, options: dict[str, Any], records: int, value_size: int, *,
                   seed: int = 1, batch: int = 10_000, flush: bool = True,
                   progress: Callable[[int], None] | None = None) -> LoadedKeys:
    """Load ``records`` keys in a child and SIGKILL it before it closes the store;
    ``progress(keys written)`` a few times a second meanwhile."""
    done = multiprocessing.get_context("spawn").Value("q", 0) if progress is not None else None
    result = run_then_kill(load_keys, backend, options, records, value_size, seed, batch, flush,
                           done, what=f"loading {records} keys into {backend}",
                           tick=None if done is None else lambda: progress(done.value))
    if progress is not None:
        progress(result.keys)
    return result
