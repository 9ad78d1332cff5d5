"""``--processes N``: one run phase spread over N processes (beyond the GIL), merged exactly.

Each process opens its own connection to the store, runs :func:`workloads.runner.run` with its
own client threads (client streams ``p * threads + t``, so no two threads share a random stream),
its share of ``operations`` and of ``target``, and sends its histograms back encoded
(HdrHistogram's own encoding, :meth:`Measurements.encode`); the parent adds them bucket by
bucket, so merged percentiles are exact.  All processes start the run phase together (a
barrier), so the phase's wall time is the slowest process's runtime.

Which backends can do this: a file backend takes a single-writer lock on its directory, so it
cannot be opened by several processes (:func:`check_backend` says so); the ``memory`` backend
gives each process its own store, loaded by that process; server backends share one store,
loaded once by the caller before the processes start.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, TextIO

from .core import CoreWorkload, WorkloadSpec
from .measure import Measurements

if TYPE_CHECKING:
    from backends import Backend
from .runner import ClientSettings, PhaseResult, load, run


def check_backend(cls: type[Backend], why: str = "so --processes > 1 cannot open it; use "
                  "--threads, or a server backend ({servers}) or memory") -> str:
    """``"own"`` (each client loads its own store), ``"shared"``, or a clear error (``why``
    says what follows from the single-process lock and the fix; ``{servers}`` in it names the
    server backends)."""
    from backends import BadOptionError, backend_names

    if cls.keeps_a_directory():
        servers = ", ".join(backend_names("server"))
        raise BadOptionError(f"backend {cls.name!r} locks its data directory to one process, "
                             f"{why.format(servers=servers)}")
    return "shared" if cls.persistent else "own"


def gil_note(cls: type[Backend], threads: int, processes: int) -> str | None:
    """One line for a server backend driven by several threads of one process: the client
    threads share one interpreter lock, so more threads add little, and ``--processes`` scales
    further.  ``None`` when it does not apply (one thread, several processes, file backends,
    memory)."""
    if threads <= 1 or processes > 1 or cls.kind != "server":
        return None
    return (f"{threads} client threads share one Python process (the GIL serializes them); "
            f"for more throughput from {cls.name}, spread them with --processes N")


def split(total: int | None, parts: int) -> list[int | None]:
    """``total`` split as evenly as possible (YCSB's way: the first ones get the remainder)."""
    if total is None:
        return [None] * parts
    return [total // parts + (i < total % parts) for i in range(parts)]


def _child(index: int, conn: Any, barrier: Any, done: Any, backend: type[Backend],
           options: dict[str, Any], spec: WorkloadSpec, clients: ClientSettings,
           load_own: bool) -> None:
    try:
        store = backend(**options)
        try:
            workload = CoreWorkload(spec, seed=clients.seed)
            loaded = load(store, workload, batch=clients.load_batch) if load_own else None
            barrier.wait()

            def progress(n: int) -> None:
                done[index] = n

            result = run(store, workload, clients, progress=progress,
                         client_offset=index * clients.threads)
        finally:
            store.close()
    except threading.BrokenBarrierError:
        conn.send(("error", "another process failed before the run started"))
        return
    except BaseException as exc:  # noqa: BLE001 - one message to the parent
        barrier.abort()
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    phases = [p for p in (loaded, result) if p is not None]
    conn.send(("ok", [(p.name, p.runtime_ms, p.operations, p.measurements.encode(), p.errors,
                       p.keys) for p in phases]))


def _merge(name: str, parts: list[tuple]) -> PhaseResult:
    merged = Measurements()
    errors: dict[str, int] = {}
    for _name, _ms, _ops, encoded, errs, _keys in parts:
        merged.merge(Measurements.decode(encoded))
        for text, n in errs.items():
            errors[text] = errors.get(text, 0) + n
    return PhaseResult(name, max(p[1] for p in parts), sum(p[2] for p in parts), merged, errors,
                       sum(p[5] for p in parts))


def run_processes(
    backend: type[Backend],
    options: dict[str, Any],
    spec: WorkloadSpec,
    clients: ClientSettings,
    *,
    processes: int,
    progress: Callable[[int], None] | None = None,
    status_interval: float | None = None,
    status_out: TextIO | None = None,
) -> tuple[PhaseResult | None, PhaseResult]:
    """Run phase over ``processes`` processes; returns ``(load, run)`` (load is the processes'
    own loads merged, for ``memory``; ``None`` when the caller loaded the shared store)."""
    from backends import CkptError

    load_own = check_backend(backend) == "own"
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(processes + 1)
    done = ctx.Array("q", processes, lock=False)
    pipes, procs = [], []
    for i in range(processes):
        parent_end, child_end = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, daemon=True, args=(
            i, child_end, barrier, done, backend, options, spec, clients.share(processes, i),
            load_own))
        proc.start()
        child_end.close()
        pipes.append(parent_end)
        procs.append(proc)
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass  # a child failed; its message arrives below
    start = time.perf_counter()
    next_status = start + status_interval if status_interval else None
    results: list[Any] = [None] * processes
    while any(r is None for r in results):
        for i, conn in enumerate(pipes):
            if results[i] is None and conn.poll(0.05):
                try:
                    results[i] = conn.recv()
                except EOFError:
                    results[i] = ("error", f"process {i} died (exit code {procs[i].exitcode})")
            elif results[i] is None and not procs[i].is_alive() and not conn.poll(0):
                results[i] = ("error", f"process {i} died (exit code {procs[i].exitcode})")
        total = sum(done)
        if progress is not None:
            progress(total)
        now = time.perf_counter()
        if next_status is not None and now >= next_status and status_out is not None:
            print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {int(now - start)} sec: {total} "
                  f"operations", file=status_out, flush=True)
            next_status += status_interval
    for proc in procs:
        proc.join()
    failed = [payload for status, payload in results if status != "ok"]
    if failed:
        real = [f for f in failed if not f.startswith("another process")] or failed
        raise CkptError(f"--processes: {real[0]}")
    loads = [phases[0] for _s, phases in results if len(phases) == 2]
    runs = [phases[-1] for _s, phases in results]
    return (_merge("load", loads) if loads else None), _merge("run", runs)
