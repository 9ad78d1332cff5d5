"""``bench services up|down|status|kill [NAME...]``: the command line over :mod:`services`."""

from __future__ import annotations

import argparse
import json
import sys

from services import (MODULES, ServiceError, default_names, down, kill, kill_host, notes, status,
                      stop_order, up)
from services.common import log


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``services`` to the ``bench`` sub-command parsers."""
    p = subparsers.add_parser(
        "services", help="install, start, stop and inspect the real servers (redis, hdfs, hbase, "
                         "minio, nfs, spark) and the several-host cluster",
        description="Manage the real servers behind the networked backends; every server "
                    "listens on 127.0.0.1 only and keeps its data under --state-dir. `cluster` "
                    "(named, as root) makes worker hosts in network namespaces on a private "
                    "bridge, each with a Spark worker and an HDFS DataNode.",
    )
    _configure(p)
    return p


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("up", "down", "status", "kill"),
                   help="up: install if missing, start, wait until ready; down: stop; "
                        "status: show; kill: SIGKILL (crash audits)")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"services (default: all of {', '.join(default_names())}; "
                        f"one of {', '.join(MODULES)})")
    p.add_argument("--durability", choices=("always", "everysec", "no"),
                   help="redis AOF appendfsync policy (default everysec; changed live if running)")
    p.add_argument("--port", type=int, help="listening port (only with one NAME)")
    p.add_argument("--rtt", type=float, metavar="MS",
                   help="nfs: add this round-trip delay (a userspace TCP delay proxy) to emulate a LAN hop")
    p.add_argument("--hbase-root", choices=("auto", "local", "hdfs"),
                   help="hbase: where its root directory and WAL go (default auto: on HDFS when "
                        "`bench services up hdfs` runs in the same state dir, else local)")
    p.add_argument("--hbase-wal-hsync", action="store_const", const=True, dest="wal_hsync",
                   help="hbase: hsync the WAL of its own tables too (hbase.wal.hsync=true: "
                        "hbase:meta survives a power cut, which wal_hsync puts need on one DataNode)")
    p.add_argument("--minio-fs-osync", choices=("on", "off"),
                   help="minio: MINIO_FS_OSYNC, a sync(2) after each object is renamed into place "
                        "(default on: the minio backend's sync mode needs it)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="cluster: worker hosts, each a network namespace with a Spark worker and "
                        "an HDFS DataNode (default 3)")
    p.add_argument("--subnet", help="cluster: the private /24 of the hosts (default 10.77.0.0/24)")
    p.add_argument("--tag", help="cluster: up to 4 letters or digits in its namespace and link "
                                 "names, so a second cluster runs beside the first (default none)")
    p.add_argument("--stores-state", metavar="DIR",
                   help="cluster: relay the Redis, MinIO and HBase of this state directory to the "
                        "hosts (default: those of --state-dir)")
    p.add_argument("--host", type=int, metavar="K",
                   help="kill cluster: kill host K alone (SIGKILL its processes, take it off "
                        "the network, delete its local directory)")
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.add_argument("--state-dir", help="data, logs and pid files (default $CKPTBENCH_STATE "
                                       "or <project>/.state)")


def _describe(st: dict) -> str:
    if not st.get("running"):
        extra = f" ({st['error']})" if st.get("error") else ""
        return f"{st['name']}: not running{extra}" + _describe_hosts(st)
    settings = " ".join(f"{k}={v}" for k, v in (st.get("settings") or {}).items())
    return (f"{st['name']}: listening on {st['address']} pid {st.get('pid')} "
            f"version {st.get('version')} {settings}").rstrip() + _describe_hosts(st)


def _describe_hosts(st: dict) -> str:
    """One line per host of a cluster: its address, namespace and processes."""
    lines: list[str] = []
    listing = st.get("hosts") or ()
    if not any(h["up"] or h["processes"] for h in listing):
        return ""  # never started, or down: nothing to list
    for h in listing:
        procs = ", ".join(f"{p['role']} {p['pid']}" for p in h["processes"]) or "no processes"
        where = f"netns {h['netns']}" if h["netns"] else "root namespace"
        state = "" if h["up"] else " DOWN"
        lines.append(f"\n  {h['host']} {h['address']} ({where}){state}: {procs}")
    return "".join(lines)


def run(args: argparse.Namespace) -> int:
    names = list(args.names) or default_names()
    if args.action == "down":
        names = stop_order(names)  # HBase before the HDFS it writes to
    if args.port is not None and len(names) != 1:
        print("bench services: --port needs exactly one service NAME", file=sys.stderr)
        return 2
    if args.host is not None and (args.action != "kill" or names != ["cluster"]):
        print("bench services: --host K goes with `kill cluster` only", file=sys.stderr)
        return 2
    if args.action == "kill" and not args.names:
        print("bench services: kill needs the NAME of the service to crash", file=sys.stderr)
        return 2
    failed = 0
    statuses = []
    for name in names:
        try:
            if args.action == "up":
                for st in up([name], state_dir=args.state_dir, durability=args.durability,
                             port=args.port, rtt=args.rtt, hbase_root=args.hbase_root,
                             workers=args.workers, subnet=args.subnet, tag=args.tag,
                             stores=args.stores_state,
                             wal_hsync=args.wal_hsync,
                             fs_osync=None if args.minio_fs_osync is None
                             else args.minio_fs_osync == "on"):
                    print(_describe(st))
            elif args.action == "down":
                down([name], state_dir=args.state_dir)
                print(f"{name}: stopped")
            elif args.action == "kill" and args.host is not None:
                gone = kill_host(args.host, state_dir=args.state_dir)
                procs = ", ".join(f"{p['role']} {p['pid']}" for p in gone["killed"])
                print(f"cluster: host {gone['host']} ({gone['address']}) killed: "
                      f"{procs or 'no processes'}; deleted {gone['deleted']}")
            elif args.action == "kill":
                kill(name, state_dir=args.state_dir)
                print(f"{name}: killed (SIGKILL)")
            else:
                statuses.extend(status([name], state_dir=args.state_dir))
        except ServiceError as exc:
            failed += 1
            if args.action == "status":
                statuses.append({"name": name, "running": False, "error": str(exc)})
            else:
                log(str(exc))
    if args.action != "status":
        for line in notes(args.action, names, state_dir=args.state_dir):
            log(line)
    if args.action == "status":
        if args.json:
            print(json.dumps(statuses, indent=2, default=str))
        else:
            for st in statuses:
                print(_describe(st))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.services_cli")
    _configure(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
