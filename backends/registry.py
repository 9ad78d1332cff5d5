"""Backend name -> implementation, and ``open_backend``.

Backends are imported lazily so that using ``indexed_fs`` never needs redis-py, happybase or
boto3 installed.  A new backend joins everything (CLI, conformance suite, Spark conf) by adding
one line to ``_BUILTIN`` or by calling :func:`register`.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Backend, BackendUnavailableError, CkptError, UnknownBackendError

_BUILTIN: dict[str, str] = {
    "memory": "backends.memory:MemoryBackend",
    "default_fs": "backends.default_fs:DefaultFSBackend",
    "indexed_fs": "backends.indexed_fs:IndexedFSBackend",
    "redis": "backends.redis:RedisBackend",
    "hbase": "backends.hbase:HBaseBackend",
    "minio": "backends.minio:MinioBackend",
    "rocksdb": "backends.rocksdb:RocksDBBackend",
    "lmdb": "backends.lmdb:LMDBBackend",
    "sqlite": "backends.sqlite:SQLiteBackend",
}

#: client library -> the extra it comes from (``pip install 'ckptbench[EXTRA]'``)
_NEEDS_EXTRA = {"redis": "servers", "happybase": "servers", "boto3": "servers",
                "rocksdict": "peers", "lmdb": "peers"}

_registry: dict[str, str | type[Backend]] = dict(_BUILTIN)


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator (or plain call) adding a backend under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name")
    _registry[cls.name] = cls
    return cls


def backend_names(kind: str | None = None) -> list[str]:
    """Every registered backend name, in registration order; with ``kind``, those of that
    :attr:`~.base.Backend.kind` among the ones that load here (a backend whose client library
    is not installed is left out rather than fail the listing)."""
    if kind is None:
        return list(_registry)
    out = []
    for name in _registry:
        try:
            if backend_class(name).kind == kind:
                out.append(name)
        except CkptError:
            continue
    return out


def backend_class(name: str) -> type[Backend]:
    """The class behind ``name``; a clear error listing the valid names otherwise."""
    try:
        entry = _registry[name]
    except (KeyError, TypeError):
        raise UnknownBackendError(
            f"unknown backend {name!r}; valid backends: {', '.join(backend_names())}"
        ) from None
    if isinstance(entry, str):
        module_name, _, attr = entry.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            package = (exc.name or "").split(".")[0]
            if package in _NEEDS_EXTRA:
                raise BackendUnavailableError(
                    f"backend {name!r} needs the Python package {exc.name!r}; "
                    f"install it with: pip install 'ckptbench[{_NEEDS_EXTRA[package]}]'"
                ) from exc
            raise
        entry = getattr(module, attr)
        _registry[name] = entry
    return entry


def open_backend(name: str, **options: Any) -> Backend:
    """Open the store ``name`` with ``options`` (``durability=`` is common to all)."""
    return backend_class(name)(**options)
