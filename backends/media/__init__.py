"""Storage media under the file backends: a local/POSIX directory, an NFS export without a mount,
or a directory on HDFS.

``open_medium(path)`` returns :class:`~backends.media.local.LocalMedium` for a plain path (also a
kernel NFS mount) and :class:`~backends.media.nfs.NfsMedium` for an ``nfs://HOST/EXPORT/DIR?...``
URL (userspace client nfs-rs) and :class:`~backends.media.hdfs.HdfsMedium` for an
``hdfs://HOST:PORT/DIR[?webhdfs=HTTP_PORT]`` URL (WebHDFS over HTTP).  All implement
:class:`~backends.media.medium.Medium` (the
operations, their semantics and errors are described there); :func:`open_data_dir` is how a file
backend opens its ``path`` option.

The local hot path stays raw: ``LocalMedium`` append files expose ``fd`` and do one
``os.write``/``os.fdatasync`` per call, so a backend may keep using plain fds locally.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

from ..base import BadOptionError
from .local import LocalMedium  # the default medium: loaded with the package, not on first open
from .medium import AppendFile, Medium, ReadFile, map_os_error, parts_of, storage_errors

__all__ = ["Medium", "AppendFile", "ReadFile", "open_medium", "open_data_dir", "is_nfs_url",
           "is_remote_url", "join",
           "map_os_error", "storage_errors", "parts_of"]


def is_nfs_url(path: str) -> bool:
    return str(path).startswith("nfs://")


def is_remote_url(path: str) -> bool:
    """A medium reached through a client (``nfs://``, ``hdfs://``), not a local directory."""
    return str(path).startswith(("nfs://", "hdfs://"))


def join(location: str, *parts: str) -> str:
    """``location``/``parts``... for a directory or an ``nfs://``/``hdfs://`` URL, whose query
    (ports, version) stays at the end."""
    if not is_remote_url(location):
        return os.path.join(location, *parts)
    p = urlsplit(location)
    return urlunsplit((p.scheme, p.netloc, "/".join([p.path.rstrip("/"), *parts]), p.query, ""))


def open_medium(path: str, label: str = "medium") -> "Medium":
    """The medium behind ``path``: NFS for ``nfs://`` URLs, else the local file system.

    ``label`` (e.g. the backend name) starts every error message.
    """
    if is_nfs_url(path):
        from .nfs import NfsMedium

        return NfsMedium(str(path), label)
    if str(path).startswith("hdfs://"):
        from .hdfs import HdfsMedium

        return HdfsMedium(str(path), label)
    return LocalMedium(str(path), label)


def open_data_dir(backend: str, path: str | None) -> "Medium":
    """A file backend's data directory (its ``path`` option) as a medium: a local path (also a
    kernel NFS mount), an ``nfs://HOST/EXPORT/DIR?version=3|4.1`` URL (userspace client) or an
    ``hdfs://HOST:PORT/DIR`` URL (WebHDFS)."""
    if not path:
        raise BadOptionError(f"backend {backend!r} needs option path=DIR (the data directory)")
    return open_medium(str(path), backend)
