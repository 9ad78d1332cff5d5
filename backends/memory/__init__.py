"""``memory``: a dict behind the interface, no I/O — measures the harness's own overhead."""

from __future__ import annotations

import itertools
import threading
from typing import Any, Iterator

from sortedcontainers import SortedDict

from ..base import Backend


class MemoryBackend(Backend):
    name = "memory"
    durability_modes = ("none",)
    persistent = False
    media = ()

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._data: SortedDict = SortedDict()
        self._lock = threading.Lock()  # SortedDict is not thread-safe for concurrent writers

    def _put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._data[key] = value

    def _get(self, key: str) -> bytes | None:
        return self._data.get(key)

    def _delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        with self._lock:
            keys = list(itertools.takewhile(lambda k: k.startswith(prefix), self._data.irange(minimum=prefix)))
        for key in keys:
            value = self._data.get(key)
            if value is not None:
                yield key, value

    def _footprint(self, prefix: str) -> int:
        """The keys' and values' bytes (the dict's own overhead is not the data's)."""
        return sum(len(k.encode()) + len(v) for k, v in self._scan(prefix))

    def _stats(self) -> dict[str, Any]:
        return {"keys": len(self._data)}
