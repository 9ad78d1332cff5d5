"""``bench load`` and ``bench run``: YCSB's two-phase command line (``ycsb load|run``).

    bench load (WORKLOAD | -P FILE...) --backend NAME [--opt path=DIR] [-p key=value]...
               [-threads N] [-target OPS] [-s]
    bench run  (WORKLOAD | -P FILE...) --backend NAME [--opt path=DIR] [-p key=value]... ...

YCSB's spellings (``-P``, ``-p``, ``-threads``, ``-target``, ``-s``) are accepted beside the
long options.  ``WORKLOAD`` names a shipped workload file (``workloada`` .. ``workloadf``,
``write-heavy``, ``checkpoint``; :mod:`workloads.properties`).  Properties come from the files
in order, then from ``-p``; a command-line option wins over the property it spells
(``-threads`` over ``threadcount``, ``-target`` over ``target``).

``load`` inserts the records with ``-threads`` threads and leaves them in the store; ``run``
runs the operations against what a ``load`` left there, so it needs a persistent backend
(file backends: the same ``--opt path=DIR`` for both).  Each prints its phase under YCSB's plain
sections (``[OVERALL]``, ``[INSERT]`` or ``[READ]`` ...), or, with
``-p exporter=site.ycsb.measurements.exporter.JSONArrayMeasurementsExporter``, YCSB's JSON
array (to ``-p exportfile=FILE`` when given).  ``--json``/``--csv`` write ckptbench's own
documents beside that.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from backends import Backend
from experiments.core import run as run_experiment
from experiments.core.spec import RunSpec
from workloads import client_properties, properties
from workloads.core import WorkloadError
from workloads.runner import ClientSettings

from . import report
from .args import (UsageError, add_backend_args, config, store_and_options,
                   positive_float, progress)
from .outputs import check_output_file
from .run_cli import resolve_seed, say_gil, seed_told, write_results

TEXT_EXPORTER = "site.ycsb.measurements.exporter.TextMeasurementsExporter"
JSON_ARRAY_EXPORTER = "site.ycsb.measurements.exporter.JSONArrayMeasurementsExporter"
#: YCSB's status interval (seconds) when ``-s`` is given without ``status.interval``
STATUS_INTERVAL = 10.0


def add_parsers(sub: Any) -> None:
    """Register ``load`` and ``run``."""
    for phase, what in (("load", "insert the workload's records and keep them in the store"),
                        ("run", "run the workload's operations against a loaded store")):
        p = sub.add_parser(phase, help=f"YCSB's {phase}: {what}",
                           description=f"YCSB's {phase} phase (ycsb {phase}): {what}.  "
                                       "bench load, then bench run, with the same workload "
                                       "and the same store (--opt path=DIR for file backends).",
                           epilog="Workload properties read: "
                                  + ", ".join(properties.FIELDS) + "; client properties: "
                                  + ", ".join(properties.CLIENT_PROPERTIES) + ".")
        p.add_argument("workload", nargs="?", metavar="WORKLOAD",
                       help="a shipped workload file: "
                            + ", ".join(sorted(x.name for x in properties.WORKLOAD_DIR.iterdir()
                                               if x.is_file())))
        p.add_argument("-P", dest="files", action="append", default=[], metavar="FILE",
                       help="a workload file (.properties); repeatable, later ones win")
        p.add_argument("-p", dest="props", action="append", default=[], metavar="KEY=VALUE",
                       help="a property, e.g. -p recordcount=2000; repeatable, wins over files")
        add_backend_args(p, random_seed=True, backend_flags=("--backend", "-db"))
        p.add_argument("-load", dest="phase", action="store_const", const="load",
                       help="YCSB's flag for the load phase (as bench load)")
        p.add_argument("-t", dest="phase", action="store_const", const="run",
                       help="YCSB's flag for the transaction phase (as bench run)")
        p.add_argument("-l", dest="label", metavar="LABEL",
                       help="YCSB's label (property label); recorded, not printed")
        p.add_argument("-threads", "--threads", dest="threads", type=int, metavar="N",
                       help="client threads (property threadcount; default 1)")
        p.add_argument("-target", "--target", dest="target", type=positive_float, metavar="OPS",
                       help="target ops/s over all threads (Intended-<OP> latencies are printed "
                            "with -p measurement.interval=both or intended)")
        p.add_argument("-s", "--status", dest="status", action="store_true",
                       help="status lines with per-operation statistics on stderr, every "
                            "status.interval seconds (default 10)")
        p.add_argument("--status-interval", type=positive_float, metavar="SECONDS",
                       help="seconds between status lines (implies -s)")
        p.add_argument("--load-batch", type=int, default=1, metavar="N",
                       help="keys per put_many in the load; 1 (default) = one put per key, "
                            "measured as INSERT like YCSB")
        p.add_argument("--csv", metavar="FILE", help="also write per-operation results as CSV")
        if phase == "run":
            p.add_argument("--processes", type=int, default=1, metavar="N",
                           help="client processes, each with -threads threads (server "
                                "backends; beyond the GIL)")
        p.set_defaults(func=cmd_phase, phase=phase)


def read_properties(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """The workload's name and its properties: the named file or ``-P`` files, then ``-p``."""
    if args.workload is None and not args.files:
        raise UsageError(f"bench {args.phase} needs a workload: a name (e.g. workloada) or "
                         "-P FILE")
    props: dict[str, str] = {}
    name = args.workload
    if args.workload is not None:
        props.update(properties.read_file(properties.workload_file(args.workload)))
    for path in args.files:
        props.update(properties.read_file(properties.resolve_file(path)))
        name = name or path.rstrip("/").rsplit("/", 1)[-1]
    for text in args.props:
        key, value = properties.assignment(text)
        props[key] = value
    if getattr(args, "label", None) is not None:
        props["label"] = args.label  # YCSB's -l sets the property
    return name, props


def _status_interval(args: argparse.Namespace, props: dict[str, str]) -> float | None:
    if args.status_interval is not None:
        return args.status_interval
    if not args.status:
        return None
    interval = properties.client_property(props, "status.interval", float, STATUS_INTERVAL)
    if interval <= 0:
        raise WorkloadError(f"status.interval must be > 0 seconds (got {interval})")
    return interval


def _hdr_prefix(props: dict[str, str]) -> str | None:
    if props.get("hdrhistogram.fileoutput", "false").strip().lower() != "true":
        return None
    return props.get("hdrhistogram.output.path", "")


def _exporter(props: dict[str, str]) -> str:
    name = props.get("exporter", TEXT_EXPORTER).strip()
    if name.endswith("JSONArrayMeasurementsExporter"):
        return "json"
    if name.endswith("TextMeasurementsExporter"):
        return "text"
    raise WorkloadError(f"exporter {name!r} is not available; use {TEXT_EXPORTER} (default) "
                        f"or {JSON_ARRAY_EXPORTER}")


def check_store(cls: type[Backend], phase: str, options: dict[str, Any]) -> None:
    """A load must leave records where a later run finds them.  A backend that keeps nothing
    between invocations (``memory``) is accepted, as YCSB accepts its BasicDB: :func:`run_spec`
    makes its run load the records first."""
    backend = cls.name
    if cls.keeps_a_directory() and not options.get("path"):
        raise UsageError(f"bench {phase} with {backend} needs the store's directory: "
                         "--opt path=DIR (the same for load and run)")


def run_spec(args: argparse.Namespace, props: dict[str, str], name: str) -> RunSpec:
    """The :class:`RunSpec` a ``bench load|run`` command line asks for."""
    store, options = store_and_options(args)
    check_store(store, args.phase, options)
    workload = properties.spec_from(props, name)
    client_properties.check_workload(props)
    threads = args.threads if args.threads is not None else \
        properties.client_property(props, "threadcount", int, 1)
    target = args.target if args.target is not None else \
        properties.client_property(props, "target", float)
    if target is not None and target <= 0:
        target = None  # YCSB: target 0 means unthrottled
    load = args.phase == "load"
    series = client_properties.measurement_type(props, _warn) == "timeseries"
    if series and getattr(args, "processes", 1) > 1:
        raise UsageError("measurementtype=timeseries needs one client process (drop --processes)")
    if series and load:
        _warn("measurementtype=timeseries applies to bench run; the load prints hdrhistogram")
    # a store that keeps nothing between invocations is empty when a run starts: load it first
    fresh = not load and not store.persistent
    clients = ClientSettings(threads=threads, operations=None if load else workload.operations,
                             duration=None if load else
                             client_properties.max_execution_time(props),
                             target=target, seed=resolve_seed(args),
                             load_batch=args.load_batch,
                             timeseries_ms=client_properties.granularity_ms(props)
                             if series and not load else None)
    cfg = config(args, options, workload_spec=workload.to_dict(), properties=dict(props),
                 update_is_read_modify_write=workload.update_is_rmw(store.record_fields),
                 fields_in_store=workload.field_count > 0 and store.record_fields)
    return RunSpec(backend=args.backend, store=store, options=options, workload=workload,
                   clients=clients,
                   processes=getattr(args, "processes", 1), skip_load=not load and not fresh,
                   skip_run=load,
                   load_threads=threads, status_interval=_status_interval(args, props),
                   hdr_prefix=_hdr_prefix(props), config=cfg)


def _warn(line: str) -> None:
    print(f"bench: {line}", file=sys.stderr)


def say_record_model(spec: RunSpec) -> None:
    """When an update writes one field and the store holds one blob per key: say that each
    update is a read-modify-write of the whole record."""
    w = spec.workload
    if spec.skip_load and w.update_is_rmw(spec.backend_class.record_fields) \
            and (w.update > 0 or w.rmw > 0):
        print(f"bench: an update writes 1 of {w.field_count} fields (writeallfields=false); "
              f"{spec.backend} holds one value per key, so each update reads the record and "
              "writes it back whole (a read-modify-write)", file=sys.stderr)


def say_properties(spec: RunSpec, props: dict[str, str]) -> None:
    """One stderr line per property YCSB acts on and this run does not, and what a store
    that keeps nothing between invocations does here."""
    for line in client_properties.warnings(props):
        _warn(line)
    if not spec.backend_class.persistent:
        what = "loads the records first" if not spec.skip_run else "keeps nothing afterwards"
        print(f"bench: {spec.backend} keeps nothing between invocations: this run {what}",
              file=sys.stderr)


def cmd_phase(args: argparse.Namespace) -> int:
    name, props = read_properties(args)
    args.workload = name
    spec = run_spec(args, props, name)
    run_experiment.check(spec)
    interval = client_properties.measurement_interval(props)
    percentiles = properties.percentiles(props)
    exporter = _exporter(props)
    export_file = props.get("exportfile")
    if export_file:
        check_output_file("-p exportfile=", export_file, "txt")
    say_properties(spec, props)
    say_record_model(spec)
    say_gil(spec)
    result = run_experiment.run(spec, progress=progress(args), on_phase=seed_told(spec))
    phase = result.phases[args.phase]
    report.print_errors(phase)
    phase = replace(phase, measurements=client_properties.select_interval(phase.measurements,
                                                                          interval))
    rows = report.phase_rows(phase, "", percentiles)
    if phase.keys == phase.operations:  # one put per key: YCSB's load has no Records line
        rows = [r for r in rows if r[:2] != ("OVERALL", "Records")]
    out = report.json_array(rows) if exporter == "json" else \
        "".join(line + "\n" for line in report.text(rows))
    if export_file:
        try:
            with open(export_file, "w", encoding="utf-8") as fh:
                fh.write(out)
        except OSError as exc:
            raise UsageError(f"cannot write exportfile {export_file!r}: "
                             f"{exc.strerror or exc}") from None
    else:
        sys.stdout.write(out)
        sys.stdout.flush()
    write_results(args, result)
    return 0
