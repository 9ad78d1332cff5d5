"""What one durability audit runs: :class:`AuditSpec`, built and checked once from the CLI's
arguments (or a test's), before any mount, server or writer starts.

The backend name is looked up in the registry here, once; everything after asks the class.  The
defaults come from the class too: the mode audited (:attr:`~backends.base.Backend.audit_mode`,
the one that claims durability), the medium a server keeps its data on
(:meth:`~backends.base.Backend.claim_medium`: HDFS for HBase's ``wal_hsync``, which is an fsync
only there), how long a writer runs before a random cut, and the claim itself
(:meth:`~backends.base.Backend.claim_of`).  A bad argument is one :class:`BadOptionError` line.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from backends import Backend, BadOptionError, Claim, backend_class, backend_names

__all__ = ["AuditSpec", "FS_MODELS", "KINDS", "SERVER_MEDIA"]

KINDS = ("power-loss", "sigkill")
#: the lossy file system's metadata models (services.lossyfs.model.METADATA_MODELS)
FS_MODELS = ("posix", "journal")
#: the media an audit can start a private server's data on (``--hbase-root``): the local file
#: system or a private HDFS on the same mount
SERVER_MEDIA = ("hdfs", "local")
#: the metadata model a power-loss audit uses unless told, by the medium a server keeps its data
#: on: HDFS fsyncs no directory where it matters (the NameNode's new edit-log segment, the
#: DataNode's new block files), so it is audited on the ``journal`` model of ext4 and XFS
DEFAULT_FS_MODEL = {"hdfs": "journal"}


@dataclass(frozen=True)
class AuditSpec:
    """One audit's arguments, checked and with every default filled in (see :meth:`build`)."""

    kind: str
    backend: type[Backend]
    durability: str
    rounds: int = 20
    threads: int = 3
    #: backend options (``path`` may be given for ``sigkill``, e.g. an ``nfs://`` URL)
    options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    run_seconds: float = 0.6
    keys_per_thread: int = 15
    fs_model: str = "posix"
    torn: bool = False
    #: where a server with a choice keeps its data (HBase's root and WAL): ``hdfs`` or
    #: ``local``; ``""`` for every other backend
    medium: str = ""
    use_hazards: bool = True
    #: power-loss: cut right after an fsync of a file matching this pattern (``fnmatch`` on the
    #: path under the mount), not at a random instant; ``""``: random cuts
    cut_after_sync: str = ""

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def claim(self) -> Claim:
        return self.backend.claim_of(self.durability, self.medium or None)

    @property
    def claims_durability(self) -> bool:
        """Whether the claim is that this kind of cut loses nothing acknowledged."""
        return self.claim.power_safe if self.kind == "power-loss" else self.claim.crash_safe

    @classmethod
    def build(cls, kind: str, backend: str, *, rounds: int = 20, threads: int = 3,
              durability: str | None = None, options: dict[str, Any] | None = None,
              seed: int | None = None, run_seconds: float | None = None,
              keys_per_thread: int = 15, fs_model: str | None = None, torn: bool = False,
              hbase_root: str | None = None, use_hazards: bool = True,
              cut_after_sync: str = "") -> AuditSpec:
        """Check the arguments and fill in the defaults; ``hbase_root`` is ``--hbase-root``."""
        if kind not in KINDS:
            raise BadOptionError(f"audit kind {kind!r} is not one of {', '.join(KINDS)}")
        cls_ = backend_class(backend)  # UnknownBackendError names the known ones
        if rounds < 1 or threads < 1:
            raise BadOptionError("--rounds and --threads must be at least 1")
        if cls_.kind == "memory":
            raise BadOptionError(f"backend {backend!r} keeps no data on a file system; audit a "
                                 f"file, embedded or server backend")
        mode = durability or cls_.audit_mode or cls_.durability_modes[0]
        allowed = cls_.claimed_modes()
        if mode not in allowed:
            raise BadOptionError(f"--durability {mode!r} is not a mode of {backend}; choose one "
                                 f"of {', '.join(allowed)}")
        options = dict(options or {})
        for bad in ("path", "durability") if cls_.kind != "server" else ():
            if bad in options and not (bad == "path" and kind == "sigkill"):
                raise BadOptionError(f"--opt {bad}= is set by the audit (use --durability for "
                                     f"the mode); leave it out")
        if "hbase_root" in options:
            raise BadOptionError("--opt hbase_root= is not a backend option; give --hbase-root "
                                 "hdfs|local")
        cls_.parse_options(options)  # an unknown option or a bad value: one line, before a start
        medium = _medium(cls_, mode, hbase_root)
        run_seconds = cls_.audit_run_seconds if run_seconds is None else run_seconds
        if not 0 < run_seconds < 3600:
            raise BadOptionError(f"--run-seconds {run_seconds} is not a number of seconds in "
                                 f"(0, 3600)")
        fs_model = fs_model or DEFAULT_FS_MODEL.get(medium, "posix")
        if fs_model not in FS_MODELS:
            raise BadOptionError(f"--fs-model {fs_model!r} is not one of {', '.join(FS_MODELS)}")
        if cut_after_sync and kind != "power-loss":
            raise BadOptionError("--cut-after-sync needs power-loss: a SIGKILL audit has no "
                                 "lossy file system to arm; leave it out or audit power-loss")
        return cls(kind, cls_, mode, rounds, threads, options,
                   random.randrange(1 << 30) if seed is None else seed, run_seconds,
                   keys_per_thread, fs_model, torn, medium, use_hazards, cut_after_sync)


def _medium(cls: type[Backend], mode: str, given: str | None) -> str:
    """The medium a server with a choice keeps its data on (``""`` for other backends): the
    one given, else the one ``mode``'s claim needs."""
    media = cls.server_media()
    if not media:
        if given:
            choosers = [n for n in backend_names("server") if backend_class(n).server_media()]
            raise BadOptionError(f"--hbase-root is for --backend {'|'.join(choosers)} only; "
                                 f"leave it out")
        return ""
    medium = given or cls.claim_medium(mode)
    if medium not in media or medium not in SERVER_MEDIA:
        raise BadOptionError(f"--hbase-root {medium!r} is not one of "
                             f"{', '.join(sorted(set(media) & set(SERVER_MEDIA)))}")
    return medium
