"""Result documents as types: one dataclass per ``ckptbench.*`` JSON schema.

Every experiment writes its result as a :class:`Document` subclass: a dataclass whose fields are
plain values, lists, dicts and nested dataclasses, with a class-level ``SCHEMA`` such as
``"ckptbench.compare/1"``.  :meth:`Document.to_json` gives the JSON object (``schema`` first,
then the fields in declaration order); :meth:`Document.from_json` reads it back, converting
nested objects to the dataclasses the field types name, so tables and plots read attributes
instead of string keys.  The conversion is driven by the type hints alone (:func:`dump`,
:func:`load`), so a document type is its field list and nothing else.

Every document carries an :class:`Environment`: the ckptbench version, the git commit of the
checkout, the machine (host name, CPU model, kernel), the CPUs the run was allowed, the load
average when the document was made, the time, the command line, and the versions of Python and
of the libraries a figure depends on (:data:`LIBRARIES`).  Two results can then be compared knowing what differed
(a figure from a busy machine, or from other code, is not the same figure).

Reading is strict where a mistake would mislead: a document of another schema, or of a newer
version of this one, is refused with :class:`DocumentError` naming both.  Keys a type does not
know are ignored, so an older reader still reads a document that grew optional fields.

A field declared with :func:`optional` is left out of the JSON while it is ``None``: a section
only some runs have (a skipped entry has no phases, a single round no ratios) is absent rather
than ``null``, as readers of the written files expect.  A field declared with
:func:`flattened` is a mapping written as one key per entry (``ratio_<reference>``), for rows
whose keys come from a registry.  :func:`parse` reads any document whose type has been imported,
choosing the type by its ``schema``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import socket
import subprocess
import sys
import time
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, TypeVar

D = TypeVar("D", bound="Document")

#: the checkout this package runs from (for the commit a result was made with)
_ROOT = Path(__file__).resolve().parents[2]


def flattened(prefix: str, suffix: str = "") -> Any:
    """A ``dict[str, X]`` field written as one key per entry, ``<prefix><key><suffix>``, beside
    the other fields (a row with one ratio per reference: ``ratio_none``, ``ratio_spark_state``).
    Reading collects the keys that match; where two flattened fields' patterns both match a key,
    the one with the longer suffix takes it."""
    return dataclasses.field(default_factory=dict, metadata={"flatten": (prefix, suffix)})


def optional(default: Any = None) -> Any:
    """A dataclass field left out of the JSON while its value is ``None`` (a section only some
    documents have)."""
    return dataclasses.field(default=default, metadata={"omit_none": True})


class DocumentError(ValueError):
    """A JSON object that is not a document of the type asked for (other schema, newer version)."""


@functools.cache
def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("ckptbench")
    except metadata.PackageNotFoundError:
        return "unknown"


def version_line() -> str:
    """ckptbench's version and, in a git checkout, its commit (what ``bench --version`` says)."""
    commit = _commit()
    return _version() + (f" (commit {commit})" if commit else "")


@functools.cache
def _commit() -> str | None:
    """``HEAD``'s commit, with ``+dirty`` when tracked files differ from it; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True,
                              text=True, timeout=10)
        if head.returncode:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=_ROOT, capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


#: the distributions whose versions every result records: the ones that measure (hdrhistogram),
#: draw (matplotlib, numpy) or are the client a backend's figure includes; one not installed is
#: left out
LIBRARIES = ("numpy", "matplotlib", "hdrhistogram", "crc32c", "redis", "hiredis", "happybase",
             "boto3", "nfs-rs", "rocksdict", "lmdb", "pyspark", "pyarrow", "pandas")


@functools.cache
def _libraries() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                         "")
    except OSError:
        model = ""
    return model or platform.machine()


@dataclasses.dataclass
class Environment:
    """Where and with what a result was made."""

    python: str = ""
    implementation: str = ""
    platform: str = ""
    cpu_count: int | None = None
    #: the CPUs the process was allowed (narrowed by ``--cpus`` or ``taskset``)
    cpus_allowed: list[int] = dataclasses.field(default_factory=list)
    hostname: str = ""
    time: str = ""
    argv: list[str] = dataclasses.field(default_factory=list)
    #: ckptbench's version and the checkout's commit (``None`` outside a git checkout)
    version: str = ""
    commit: str | None = None
    #: the 1, 5 and 15 minute load averages when the document was made
    loadavg: list[float] = dataclasses.field(default_factory=list)
    #: the CPU's model name (two results from different CPUs are not the same figure)
    cpu_model: str = ""
    #: the installed versions of :data:`LIBRARIES` (distribution name -> version)
    libraries: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def here(cls) -> Environment:
        return cls(
            python=platform.python_version(),
            implementation=platform.python_implementation(),
            platform=platform.platform(),
            cpu_count=os.cpu_count(),
            cpus_allowed=sorted(os.sched_getaffinity(0)),
            hostname=socket.gethostname(),
            time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            argv=list(sys.argv),
            version=_version(),
            commit=_commit(),
            loadavg=[round(x, 2) for x in os.getloadavg()],
            cpu_model=cpu_model(),
            libraries=dict(_libraries()),
        )


@dataclasses.dataclass
class Document:
    """Base of every result document; subclasses are dataclasses that set ``SCHEMA``."""

    SCHEMA: ClassVar[str] = ""
    #: schema name (without the version) -> its document type, for :func:`parse`
    TYPES: ClassVar[dict[str, type[Document]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.SCHEMA:
            Document.TYPES[cls.SCHEMA.partition("/")[0]] = cls

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.SCHEMA, **dump(self)}

    @classmethod
    def from_json(cls: type[D], doc: dict[str, Any]) -> D:
        check_schema(doc, cls.SCHEMA)
        return load(cls, {k: v for k, v in doc.items() if k != "schema"})


def parse(doc: Any) -> Document:
    """``doc`` as the document type its ``schema`` names (that type's module must be imported);
    :class:`DocumentError` for an object that is no known document."""
    name = str(doc.get("schema")).partition("/")[0] if isinstance(doc, dict) else None
    tp = Document.TYPES.get(name or "")
    if tp is None:
        schema = doc.get("schema") if isinstance(doc, dict) else None
        raise DocumentError(f"not a ckptbench result (schema {schema!r}); give a JSON file a "
                            "ckptbench command wrote")
    return tp.from_json(doc)


def check_schema(doc: Any, schema: str) -> None:
    """Refuse an object that is not a ``schema`` document, or is of a newer version of it."""
    name, _, version = schema.partition("/")
    got = doc.get("schema") if isinstance(doc, dict) else None
    got_name, _, got_version = str(got).partition("/")
    if got_name != name:
        raise DocumentError(f"not a {name} document (schema {got!r}); give the JSON file the "
                            f"command that makes {name} results wrote")
    if got_version.isdigit() and version.isdigit() and int(got_version) > int(version):
        raise DocumentError(f"{got} is newer than this ckptbench reads ({schema}); update "
                            "ckptbench to read it")


def dump(value: Any) -> Any:
    """The JSON form of a dataclass, list, tuple or dict of them (other values as they are)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if "flatten" in f.metadata:
                prefix, suffix = f.metadata["flatten"]
                out.update({f"{prefix}{k}{suffix}": dump(x) for k, x in v.items()})
            elif not (f.metadata.get("omit_none") and v is None):
                out[f.name] = dump(v)
        return out
    if isinstance(value, (list, tuple)):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return value


def load(tp: Any, value: Any) -> Any:
    """``value`` (parsed JSON) as type ``tp``: dataclasses built from objects, recursively
    through ``list[...]``, ``tuple[...]``, ``dict[str, ...]`` and ``X | None``."""
    if value is None or tp is Any:
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        fields = [f for f in dataclasses.fields(tp) if f.init]
        known = {f.name for f in fields if "flatten" not in f.metadata}
        args = {k: load(hints[k], v) for k, v in value.items() if k in known}
        flat = sorted((f for f in fields if "flatten" in f.metadata),
                      key=lambda f: -len(f.metadata["flatten"][1]))
        for f in flat:
            args[f.name] = {}
        for k, v in value.items():
            for f in flat if k not in known else ():
                prefix, suffix = f.metadata["flatten"]
                if k.startswith(prefix) and k.endswith(suffix) and len(k) > len(prefix + suffix):
                    key = k[len(prefix):len(k) - len(suffix)]
                    args[f.name][key] = load(typing.get_args(hints[f.name])[1], v)
                    break
        return tp(**args)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return load(options[0], value) if len(options) == 1 else value
    if origin is list:
        return [load(args[0] if args else Any, v) for v in value]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(load(args[0], v) for v in value)
        return tuple(load(a, v) for a, v in zip(args, value)) if args else tuple(value)
    if origin is dict:
        return {k: load(args[1] if args else Any, v) for k, v in value.items()}
    if tp is float and isinstance(value, int):
        return float(value)
    return value


@functools.cache
def _hints(tp: type) -> dict[str, Any]:
    return typing.get_type_hints(tp)
