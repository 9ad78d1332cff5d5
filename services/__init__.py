"""Real servers for the networked backends: install, start, stop, status, crash and restart them.

The Python API used by tests and by ``bench services`` (see :mod:`services_cli`)::

    up(["redis"], durability="always")   # install if missing, start, wait until it answers
    client_options("redis", "t1")        # options for open_backend("redis", **opts), isolated
    kill("redis"); restart("redis")      # SIGKILL (crash audit), then start with the same options
    status(["redis"]); down(["redis"])

Service modules are imported lazily from :data:`MODULES`; each follows the contract in
:mod:`services.common`.  Options such as ``durability`` or ``port`` are handed only to the
services whose ``start`` declares a parameter of that name.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

from .common import ServiceContext, ServiceError, kill_pid, load_options, log

MODULES: dict[str, str] = {
    "redis": "services.redis",
    "hdfs": "services.hdfs",  # before hbase: a running HDFS is where HBase puts its root and WAL
    "hbase": "services.hbase",
    "minio": "services.minio",
    "nfs": "services.nfs",
    "spark": "services.spark",  # standalone master + worker (no server backend: a cluster)
    "cluster": "services.cluster",  # worker hosts in network namespaces: started only by name
}

#: services that ``up``/``down``/``status`` without names leave alone: the cluster needs root
#: and makes network namespaces, which nothing should do unasked
ON_DEMAND = frozenset({"cluster"})

__all__ = ["MODULES", "ON_DEMAND", "ServiceError", "install", "up", "down", "stop_order", "status", "kill",
           "kill_host", "restart", "notes", "default_names",
           "client_options", "crash_audit", "module", "context"]


def module(name: str) -> ModuleType:
    """The service module for ``name``; a clear :class:`ServiceError` if unknown or missing."""
    try:
        path = MODULES[name]
    except KeyError:
        raise ServiceError(
            f"unknown service {name!r}; known services: {', '.join(MODULES)}"
        ) from None
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name == path:
            raise ServiceError(
                f"service {name!r} is not available in this checkout (module {path} is missing)"
            ) from exc
        raise


def context(name: str, state_dir: str | Path | None = None) -> ServiceContext:
    return ServiceContext.for_service(name, Path(state_dir) if state_dir else None)


def _names(names: Iterable[str] | str | None) -> list[str]:
    if isinstance(names, str):
        return [names]
    return list(names or ()) or default_names()


def default_names() -> list[str]:
    """What a command without service names acts on: every service but :data:`ON_DEMAND`."""
    return [n for n in MODULES if n not in ON_DEMAND]


def _start(mod: ModuleType, ctx: ServiceContext, opts: dict[str, Any]) -> dict:
    """Call ``mod.start`` with those of ``opts`` it declares by name (None = its default)."""
    params = inspect.signature(mod.start).parameters
    given = {k: v for k, v in opts.items()
             if v is not None and k in params
             and params[k].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    inspect.Parameter.KEYWORD_ONLY)}
    return mod.start(ctx, **given)


def install(names: Iterable[str] | str | None = None) -> None:
    """Install (download/build into the user caches) without starting anything; idempotent."""
    for name in _names(names):
        module(name).install(log)


def up(names: Iterable[str] | str | None = None, state_dir: str | Path | None = None,
       **opts: Any) -> list[dict]:
    """Install what is missing, start each service (or reuse it) and return their statuses."""
    out = []
    for name in _names(names):
        mod = module(name)
        mod.install(log)
        out.append(_start(mod, context(name, state_dir), opts))
    return out


def stop_order(names: Iterable[str]) -> list[str]:
    """``names`` in the reverse of :data:`MODULES`' order: a service stops before the ones it
    runs on (HBase before the HDFS holding its WAL)."""
    order = list(MODULES)
    return sorted(names, key=lambda n: -order.index(n) if n in order else 0)


def down(names: Iterable[str] | str | None = None, state_dir: str | Path | None = None) -> None:
    """Stop each service gracefully (no error if it is not running), in :func:`stop_order`."""
    for name in stop_order(_names(names)):
        module(name).stop(context(name, state_dir))


def notes(action: str, names: Iterable[str], state_dir: str | Path | None = None) -> list[str]:
    """Lines about services ``action`` did not name but touched: HBase running on an HDFS that
    was stopped, killed or started under it (see :func:`services.hbase.hdfs_note`)."""
    names = list(names)
    if "hdfs" not in names or "hbase" in names:
        return []
    note = module("hbase").hdfs_note(context("hbase", state_dir), action)
    return [note] if note else []


def status(names: Iterable[str] | str | None = None,
           state_dir: str | Path | None = None) -> list[dict]:
    return [module(n).status(context(n, state_dir)) for n in _names(names)]


def kill(name: str, state_dir: str | Path | None = None) -> None:
    """SIGKILL the service's processes: a real crash, for durability audits."""
    mod = module(name)
    ctx = context(name, state_dir)
    (getattr(mod, "kill", None) or kill_pid)(ctx)


def kill_host(host: int, state_dir: str | Path | None = None) -> dict:
    """Host ``host`` of the cluster dies (:func:`services.cluster.kill_host`)."""
    return module("cluster").kill_host(context("cluster", state_dir), host)


def restart(name: str, state_dir: str | Path | None = None) -> dict:
    """Stop (if still running) and start again with the options it was last started with."""
    mod = module(name)
    ctx = context(name, state_dir)
    mod.stop(ctx)
    return _start(mod, ctx, load_options(ctx))


def client_options(name: str, namespace: str, state_dir: str | Path | None = None) -> dict:
    """Backend options for the running ``name`` server, isolated under ``namespace``."""
    return module(name).client_options(context(name, state_dir), namespace)


def crash_audit(name: str, open_store, *, run_seconds: float = 1.0, value_size: int = 1024,
                state_dir: str | Path | None = None) -> dict[str, Any]:
    """SIGKILL ``name`` while a writer puts checkpoints; restart it; count acknowledged writes lost.

    ``open_store()`` opens a fresh backend on the service (it is called once for the writer and
    once after the restart).  A write counts as acknowledged when ``put`` returned; the write in
    flight at the kill may or may not survive and is not counted.  Returns ``{"acknowledged",
    "lost", "lost_keys" (first 20), "writer_error"}``.
    """
    import threading
    import time

    acked: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    value = bytes(range(256)) * (value_size // 256) + b"x" * (value_size % 256)

    def writer() -> None:
        store = open_store()
        try:
            i = 0
            while not stop.is_set():
                key = f"audit-{i:08d}"
                store.put(key, value)
                acked.append(key)
                i += 1
        except BaseException as exc:  # the crash: the first failed put ends the run
            errors.append(exc)
        finally:
            try:
                store.close()
            except BaseException:
                pass

    thread = threading.Thread(target=writer, name=f"{name}-audit-writer")
    thread.start()
    time.sleep(run_seconds)
    kill(name, state_dir=state_dir)
    # the writer's next put meets the dead server and ends the run; only a writer that has not
    # failed by then is told to stop (setting `stop` at once could let a writer whose last reply
    # came just before the kill leave cleanly, and the audit would not show the kill hit it)
    thread.join(60)
    stop.set()
    thread.join(60)
    if thread.is_alive():
        raise ServiceError(f"{name}: the audit writer hung after SIGKILL (no timeout?)")
    restart(name, state_dir=state_dir)
    store = open_store()
    try:
        found = {}
        for start in range(0, len(acked), 500):
            found.update(store.get_many(acked[start:start + 500]))
    finally:
        store.close()
    lost = [k for k in acked if found.get(k) != value]
    return {"acknowledged": len(acked), "lost": len(lost), "lost_keys": lost[:20],
            "writer_error": repr(errors[0]) if errors else None}
