"""``python -m services.lossyfs COMMAND``: mount, crash and unmount a lossy file system.

    mount BACKING MOUNTPOINT [--metadata posix|journal]   start the daemon in the background
    crash MOUNTPOINT --backing B [--torn]      power cut + reboot: drop everything not fsynced
    power-off MOUNTPOINT --backing B [--torn]  power cut only (I/O fails until power-on)
    power-on MOUNTPOINT --backing B
    stats MOUNTPOINT --backing B               what is not durable yet, counters
    unmount MOUNTPOINT --backing B
    install                         apt-get install fuse3 if fusermount3 is missing
    gate --backing B -- PROGRAM ARGS...        run PROGRAM so its sync(2)/syncfs(2) make the mount
                                               durable (FUSE never sees them; syncgate.py)
    serve BACKING MOUNTPOINT [--metadata ...]             the daemon itself, in the foreground

The control socket is ``BACKING/control.sock``; every command but mount, serve and install takes
``--backing BACKING`` to find it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import LossyFS, LossyFSError, install


def _attach(args: argparse.Namespace) -> LossyFS:
    backing = Path(args.backing).resolve()
    if not (backing / "control.sock").exists():
        raise LossyFSError(f"lossyfs: no control socket in {backing}; is it mounted from there?")
    return LossyFS(backing, Path(args.mountpoint).resolve())


def _gate(args: argparse.Namespace) -> int:
    from .syncgate import run

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise LossyFSError("lossyfs gate: no program given; use `gate --backing B -- PROGRAM ...`")
    fs = LossyFS(Path(args.backing).resolve(), Path("/"))

    def on_sync() -> None:
        try:
            fs.sync()
        except LossyFSError as exc:  # the daemon is gone: nothing can be made durable
            print(f"lossyfs gate: sync not passed on: {exc}", file=sys.stderr, flush=True)

    return run(program, on_sync)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.lossyfs",
                                     description="A lossy FUSE file system for power-cut tests.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("serve", "mount"):
        p = sub.add_parser(name)
        p.add_argument("backing")
        p.add_argument("mountpoint")
        p.add_argument("--metadata", choices=("posix", "journal"), default="posix",
                       help="posix: a directory's entries are durable once it is fsynced; "
                            "journal: any fsync commits every earlier namespace change")
    for name in ("crash", "power-off", "power-on", "stats", "unmount"):
        p = sub.add_parser(name)
        p.add_argument("mountpoint")
        p.add_argument("--backing", required=True, help="the backing directory of the mount")
        if name in ("crash", "power-off"):
            p.add_argument("--torn", action="store_true",
                           help="keep a random prefix of the newest unsynced write")
    sub.add_parser("install")
    p = sub.add_parser("gate")
    p.add_argument("--backing", required=True, help="the backing directory of the mount")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "gate":
            return _gate(args)
        if args.cmd == "serve":
            from .fs import serve

            backing = Path(args.backing).resolve()
            serve(str(backing), str(Path(args.mountpoint).resolve()),
                  str(backing / "control.sock"), args.metadata)
        elif args.cmd == "mount":
            fs = LossyFS.mount(args.backing, args.mountpoint, metadata=args.metadata)
            print(f"lossyfs: {fs.mountpoint} mounted (daemon pid {fs.proc.pid})")
        elif args.cmd == "install":
            install()
        else:
            fs = _attach(args)
            if args.cmd == "crash":
                print(json.dumps(fs.crash(torn=args.torn)))
            elif args.cmd == "power-off":
                print(json.dumps(fs.power_off(torn=args.torn)))
            elif args.cmd == "power-on":
                fs.power_on()
            elif args.cmd == "stats":
                print(json.dumps(fs.stats(), sort_keys=True))
            else:
                fs.unmount()
    except LossyFSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
