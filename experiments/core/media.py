"""Storage media a run can put a file store on: a local directory, tmpfs, an NFS export or a
directory on HDFS — what ``bench storage-compare --media`` compares and ``bench spark --medium``
places a job's store on.

A :class:`Medium` is a place plus whether it can be used: one that cannot (no NFS server, no HDFS,
no /dev/shm, a directory that is missing) is kept with ``skipped`` saying why and how to fix it, so
the report lists it instead of silently measuring less.  Every directory a run creates comes from
:func:`scratch` and is removed afterwards, locally, over NFS or on HDFS; the temp directories a
default medium creates are removed by :func:`cleanup`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

from backends.base import BadOptionError
from backends.media import is_remote_url, join

MEDIA_KINDS = ("local", "tmpfs", "nfs", "hdfs")
#: kinds whose location is a URL (``nfs://``, ``hdfs://``) rather than a directory
URL_KINDS = ("nfs", "hdfs")


@dataclass
class Medium:
    """One medium under test: ``location`` is a directory or an ``nfs://``/``hdfs://`` URL."""

    name: str
    kind: str
    location: str
    skipped: str | None = None
    _own: str | None = field(default=None, repr=False)  # temp dir we created (removed after)


#: the media a server provides, and the form of their URLs (for the error a wrong one gets)
_SERVER_URLS = {"nfs": "nfs://HOST/EXPORT[/DIR]?version=3|4.1 (a kernel mount is local:/mnt/...)",
                "hdfs": "hdfs://HOST:PORT/DIR[?webhdfs=HTTP_PORT]"}


def _server_default(kind: str) -> Medium:
    """The server of ``bench services up nfs|hdfs``; skipped (with the fix) when it is not
    running."""
    what = {"nfs": "NFS server", "hdfs": "HDFS"}[kind]
    try:
        import services

        st = services.status([kind])[0]
        if not st.get("running"):
            why = st.get("error") or "not running"
            return Medium(kind, kind, "", skipped=f"{what}: {why}; start it with "
                          f"`bench services up {kind}`")
        url = services.client_options(kind, f"storage-compare-{uuid.uuid4().hex[:8]}")["path"]
        return Medium(kind, kind, url, _own=url)  # removed after the run
    except Exception as exc:  # noqa: BLE001 - any failure here means "skipped, with why"
        return Medium(kind, kind, "", skipped=f"{type(exc).__name__}: {exc}; start the "
                      f"server with `bench services up {kind}`")


def _temp_medium(name: str, kind: str, parent: str) -> Medium:
    if not os.path.isdir(parent):
        return Medium(name, kind, "", skipped=f"{parent} does not exist; give a directory with "
                      f"--media {kind}:DIR")
    try:
        tmp = tempfile.mkdtemp(prefix="ckptbench-storage-compare-", dir=parent)
    except OSError as exc:
        return Medium(name, kind, "", skipped=f"cannot create a directory under {parent}: "
                      f"{exc.strerror or exc}; give a writable one with --media {kind}:DIR")
    return Medium(name, kind, tmp, _own=tmp)


def parse_media(text: str | None) -> list[Medium]:
    """``local:DIR,nfs:URL,tmpfs:DIR,hdfs:URL`` (a kind without ``:VALUE`` takes its default: a
    temp dir under the working directory, a temp dir under /dev/shm, the `bench services` NFS
    server or HDFS).  ``None`` means all four defaults."""
    items = [s.strip() for s in (text or ",".join(MEDIA_KINDS)).split(",") if s.strip()]
    if not items:
        raise BadOptionError("--media is empty; give e.g. --media local:/data,nfs:nfs://HOST/EXPORT")
    out: list[Medium] = []
    for item in items:
        kind, _, value = item.partition(":")
        kind = kind.strip().lower()
        if kind not in MEDIA_KINDS:
            raise BadOptionError(f"--media {item!r}: unknown kind {kind!r}; valid: "
                                 f"{', '.join(MEDIA_KINDS)} (e.g. local:/mnt/nfs/ckpt)")
        name = kind if all(m.name != kind for m in out) else f"{kind}{len(out) + 1}"
        if kind in _SERVER_URLS:
            if not value:
                m = _server_default(kind)
                m.name = name
            elif not value.startswith(f"{kind}://"):
                raise BadOptionError(f"--media {item!r}: {kind} needs a URL {_SERVER_URLS[kind]}")
            else:
                m = Medium(name, kind, value)
        elif value:
            m = _temp_medium(name, kind, value)
        else:
            m = _temp_medium(name, kind, os.getcwd() if kind == "local" else "/dev/shm")
        out.append(m)
    return out


def sub_location(location: str, sub: str) -> str:
    """``location``/``sub`` for a directory or an ``nfs://``/``hdfs://`` URL (the query is kept)."""
    return join(location, sub)


def fresh_location(medium: Medium, what: str) -> str:
    return sub_location(medium.location, f"{what}-{uuid.uuid4().hex[:8]}")


def _split(location: str) -> tuple[str, str]:
    """(parent location, last path component) of a directory or an ``nfs://``/``hdfs://`` URL."""
    if is_remote_url(location):
        p = urlsplit(location)
        head, tail = p.path.rstrip("/").rsplit("/", 1)
        return urlunsplit((p.scheme, p.netloc, head, p.query, "")), tail
    return os.path.dirname(location.rstrip("/")), os.path.basename(location.rstrip("/"))


def remove_tree(location: str) -> None:
    """Delete a directory tree a run created, locally, over NFS or on HDFS (best effort: cleanup
    must not hide the run's result)."""
    from backends.media import open_medium

    if location.startswith("hdfs://"):
        with contextlib.suppress(Exception), open_medium(location, "storage-compare") as hm:
            hm.remove_tree()
        return
    if not location.startswith("nfs://"):
        shutil.rmtree(location, ignore_errors=True)
        return
    parent, name = _split(location)
    with contextlib.suppress(Exception), open_medium(parent, "storage-compare") as m:
        client = m.client

        def rmtree(path: str) -> None:
            for child in client.listdir(path):
                full = f"{path}/{child}"
                if client.stat(full).type.value == "directory":
                    rmtree(full)
                else:
                    client.unlink(full, missing_ok=True)
            client.rmdir(path)

        rmtree(m.abs(name))


@contextlib.contextmanager
def scratch(medium: Medium, what: str) -> Iterator[str]:
    loc = fresh_location(medium, what)
    try:
        yield loc
    finally:
        remove_tree(loc)


def cleanup(media: list[Medium]) -> None:
    for m in media:
        if m._own:
            remove_tree(m._own)

