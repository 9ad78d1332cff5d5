"""NFS: Debian's ``nfs-ganesha`` (VFS backend) exporting ``<state>/nfs/data/export`` on loopback.

What runs, and why (decided after probing this machine):

* **ganesha.nfsd** in the host's network namespace, bound to ``127.0.0.1`` only: NFS on port
  2049 (``--port``), MOUNT on the fixed port 20048, NLM/RQUOTA/UDP off, NFSv3 and NFSv4.1, VFS FSAL,
  ``Graceless = true`` (no 90 s NFSv4 grace period after a restart).  Config:
  ``nfs_files/ganesha.conf.tmpl``.
* **rpcbind** is needed only because ganesha refuses to start when it cannot register NFSv3 with a
  portmapper.  It registers through rpcbind's *unix socket* ``/run/rpcbind.sock`` (libtirpc tries
  that before TCP/UDP 111), and unix sockets are not scoped by network namespace.  So rpcbind runs
  as ``unshare --net -- rpcbind -f``: its ports 111 live in a private, anonymous network namespace
  (no interfaces, gone with the process) and the host's port 111 is never taken; no veth pair and
  no non-loopback address.  If a host rpcbind already answers on the socket it is reused as is.
* **Clients never need the portmapper**: nfs-rs takes the ports in the URL
  (``nfsport=``/``mountport=``), see :func:`client_options`.
* ``--rtt MS`` (``up(["nfs"], rtt=MS)``) puts a small asyncio TCP proxy (:class:`DelayProxy`,
  :mod:`services.relay` in a process of its own) in front of both ports, delaying each direction by
  ``MS/2`` to emulate a LAN hop (this kernel has no netem); clients then get the proxy's ports
  (NFS ``port+10000``, MOUNT ``20048+10000``).  asyncio timers have ~1 ms resolution.

``kill`` SIGKILLs ganesha only (a server crash); ``down`` stops ganesha, the proxy and our rpcbind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

from .relay import Relay as DelayProxy  # the --rtt proxy; tests and experiments count RPCs with it
from .common import (
    ServiceContext,
    ServiceError,
    apt_install,
    kill_pid,
    load_options,
    port_open,
    require_port_free,
    save_options,
    spawn,
    stop_pid,
    wait_until,
)

NAME = "nfs"
HOST = "127.0.0.1"
DEFAULT_PORT = 2049
MOUNT_PORT = 20048
PROXY_OFFSET = 10000
RPCBIND_SOCK = "/run/rpcbind.sock"
PLUGINS_DIR = "/usr/lib/x86_64-linux-gnu/ganesha"
PACKAGES = ("nfs-ganesha", "nfs-ganesha-vfs", "rpcbind")
TEMPLATE = Path(__file__).with_name("nfs_files") / "ganesha.conf.tmpl"
PROJECT_ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------ install
def _installed() -> bool:
    return bool(shutil.which("ganesha.nfsd") and shutil.which("rpcbind")
                and Path(PLUGINS_DIR, "libfsalvfs.so").exists())


def install(log) -> None:
    """``apt-get install nfs-ganesha nfs-ganesha-vfs rpcbind`` if any of them is missing."""
    if _installed():
        return
    apt_install("nfs", PACKAGES, log)
    # Debian may start its own units; we run our own server, so keep the packaged ones off.
    if shutil.which("systemctl"):
        subprocess.run(["systemctl", "disable", "--now", "nfs-ganesha", "rpcbind",
                        "rpcbind.socket"], capture_output=True)
    if not _installed():
        raise ServiceError("nfs: apt-get finished but ganesha.nfsd, rpcbind or the VFS FSAL "
                           f"({PLUGINS_DIR}/libfsalvfs.so) is missing")


# ------------------------------------------------------------------------------------ helpers
def _helper(ctx: ServiceContext, part: str) -> ServiceContext:
    """A context (own pid file and log) for one helper process: ``rpcbind`` or ``proxy``."""
    helper = ServiceContext(f"nfs-{part}", ctx.root / part)
    helper.log_dir.mkdir(parents=True, exist_ok=True)
    return helper


def export_dir(ctx: ServiceContext) -> Path:
    return ctx.data_dir / "export"


def _options(ctx: ServiceContext) -> dict:
    opts = {"port": DEFAULT_PORT, "mount_port": MOUNT_PORT, "rtt": 0.0}
    opts.update(load_options(ctx))
    return opts


def _client_ports(opts: dict) -> tuple[int, int]:
    """The (NFS, MOUNT) ports clients use: the server's, or the delay proxy's with ``--rtt``."""
    nfs, mnt = int(opts["port"]), int(opts["mount_port"])
    if float(opts.get("rtt") or 0) > 0:
        return nfs + PROXY_OFFSET, mnt + PROXY_OFFSET
    return nfs, mnt


def url(ctx: ServiceContext, subdir: str = "", version: str = "3") -> str:
    """``nfs://127.0.0.1/<export>[/subdir]?version=..&nfsport=..&mountport=..`` for nfs-rs."""
    nfs, mnt = _client_ports(_options(ctx))
    path = str(export_dir(ctx)) + (f"/{subdir.strip('/')}" if subdir.strip("/") else "")
    return f"nfs://{HOST}{path}?version={version}&nfsport={nfs}&mountport={mnt}"


def _answers(ctx: ServiceContext, timeout: float = 2.0) -> bool:
    """A real NFSv3 MOUNT + GETATTR through the client-facing ports."""
    import nfs_rs

    try:
        with nfs_rs.Client.connect(url(ctx), connect_timeout=timeout,
                                   operation_timeout=timeout) as client:
            client.stat(".")
        return True
    except (nfs_rs.NfsError, OSError):
        return False


def _rpcbind_answers() -> bool:
    with contextlib.suppress(OSError):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            sock.connect(RPCBIND_SOCK)
            return True
    return False


def _ensure_rpcbind(ctx: ServiceContext) -> None:
    """Our rpcbind in a private network namespace, unless one already answers on the socket."""
    helper = _helper(ctx, "rpcbind")
    if helper.read_pid() is not None or _rpcbind_answers():
        return
    unshare = shutil.which("unshare")
    if not unshare:
        raise ServiceError("nfs: `unshare` (util-linux) is missing; install util-linux")
    spawn(helper, [unshare, "--net", "--", shutil.which("rpcbind") or "rpcbind", "-f"])
    wait_until(helper, _rpcbind_answers, 15, f"rpcbind on {RPCBIND_SOCK}")


def _write_config(ctx: ServiceContext, opts: dict) -> Path:
    for d in (export_dir(ctx), ctx.data_dir / "recovery"):
        d.mkdir(parents=True, exist_ok=True)
    text = string.Template(TEMPLATE.read_text()).substitute(
        nfs_port=int(opts["port"]), mount_port=int(opts["mount_port"]), plugins_dir=PLUGINS_DIR,
        recovery_dir=ctx.data_dir / "recovery", export_dir=export_dir(ctx),
    )
    conf = ctx.root / "ganesha.conf"
    conf.write_text(text)
    return conf


def _start_proxy(ctx: ServiceContext, opts: dict) -> None:
    helper = _helper(ctx, "proxy")
    stop_pid(helper, timeout=5)
    rtt = float(opts.get("rtt") or 0)
    if rtt <= 0:
        return
    nfs, mnt = int(opts["port"]), int(opts["mount_port"])
    maps = [f"{nfs + PROXY_OFFSET}:{nfs}", f"{mnt + PROXY_OFFSET}:{mnt}"]
    for m in maps:
        require_port_free(NAME, HOST, int(m.split(":")[0]), wait=5)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
    spawn(helper, [sys.executable, "-m", "services.relay", "--rtt", str(rtt),
                   *[a for m in maps for a in ("--map", m)]], env=env, cwd=PROJECT_ROOT)
    wait_until(helper, lambda: all(port_open(HOST, int(m.split(":")[0])) for m in maps), 15,
               "the --rtt delay proxy")


# ------------------------------------------------------------------------------ the contract
def start(ctx: ServiceContext, port: int | None = None, rtt: float | None = None,
          mount_port: int | None = None, **_ignored: Any) -> dict:
    """Start (or reuse) rpcbind + ganesha; ``rtt`` (ms) adds or changes the delay proxy;
    ``port``/``mount_port`` let a second (test) server run beside the shared one."""
    previous = _options(ctx)
    running = ctx.read_pid() is not None
    opts = {"port": int(port or (previous["port"] if running else DEFAULT_PORT)),
            "mount_port": int(mount_port or (previous["mount_port"] if running else MOUNT_PORT)),
            "rtt": float(rtt if rtt is not None else previous.get("rtt") or 0)}
    if opts["rtt"] < 0:
        raise ServiceError(f"nfs: --rtt {opts['rtt']} must be >= 0 (milliseconds)")
    if running:
        if int(previous["port"]) != opts["port"]:
            raise ServiceError(
                f"nfs: already running on {HOST}:{previous['port']}; "
                f"run `bench services down nfs` first to move it to port {opts['port']}"
            )
        save_options(ctx, opts)
        if float(previous.get("rtt") or 0) != opts["rtt"] or (
                opts["rtt"] > 0 and _helper(ctx, "proxy").read_pid() is None):
            _start_proxy(ctx, opts)
        wait_until(ctx, lambda: _answers(ctx), 60, f"nfs-ganesha on {HOST}:{opts['port']}")
        return status(ctx)
    for p in (opts["port"], opts["mount_port"]):
        require_port_free(NAME, HOST, p, wait=5)
    save_options(ctx, opts)
    _ensure_rpcbind(ctx)
    conf = _write_config(ctx, opts)
    spawn(ctx, [shutil.which("ganesha.nfsd") or "ganesha.nfsd", "-F", "-f", str(conf),
                "-L", str(ctx.log_dir / f"{NAME}.log"), "-p", str(ctx.root / "ganesha.pid"),
                "-N", "NIV_EVENT"])
    _start_proxy(ctx, opts)
    wait_until(ctx, lambda: _answers(ctx), 60, f"nfs-ganesha on {HOST}:{opts['port']}")
    return status(ctx)


def stop(ctx: ServiceContext) -> None:
    """SIGTERM ganesha (it flushes and unregisters), then the proxy and our rpcbind."""
    stop_pid(_helper(ctx, "proxy"), timeout=5)
    stop_pid(ctx)
    stop_pid(_helper(ctx, "rpcbind"), timeout=5)


def kill(ctx: ServiceContext) -> None:
    """SIGKILL ganesha only: a server crash; rpcbind and the proxy stay for the restart."""
    kill_pid(ctx)


def _version() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run([shutil.which("ganesha.nfsd") or "ganesha.nfsd", "-v"],
                             capture_output=True, text=True, timeout=10).stdout
        return out.split("=")[-1].strip() or None
    return None


def status(ctx: ServiceContext) -> dict:
    opts = _options(ctx)
    nfs, mnt = _client_ports(opts)
    rpcbind_pid = _helper(ctx, "rpcbind").read_pid()
    out: dict[str, Any] = {
        "name": NAME, "running": False, "pid": ctx.read_pid(), "address": f"{HOST}:{nfs}",
        "version": None,
        "settings": {
            "export": str(export_dir(ctx)), "protocols": "NFSv3,NFSv4.1", "transport": "tcp",
            "mount_port": mnt, "server_port": int(opts["port"]), "graceless": True,
            "fsal": "VFS", "rtt_ms": float(opts.get("rtt") or 0),
            "proxy_pid": _helper(ctx, "proxy").read_pid(),
            "rpcbind": (f"pid {rpcbind_pid} in a private network namespace" if rpcbind_pid
                        else "host rpcbind" if _rpcbind_answers() else "not running"),
            "url": url(ctx),
        },
    }
    if out["pid"] is None:
        return out
    if not _answers(ctx):
        out["error"] = f"nfs-ganesha pid {out['pid']} does not answer NFSv3 on {HOST}:{nfs}"
        return out
    out["running"] = True
    out["version"] = _version()
    return out


def client_options(ctx: ServiceContext, namespace: str) -> dict:
    """``{"path": nfs://...}`` for the file backends, isolated in the export's ``namespace`` dir."""
    return {"path": url(ctx, namespace)}
