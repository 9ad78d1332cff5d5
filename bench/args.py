"""Argument pieces every ``bench`` command shares: the one-line usage error, value types, and
the backend and ``--cpus`` options.  Commands' own parsers live beside their commands."""

from __future__ import annotations

import argparse
import functools
import math
import sys
import tempfile
from typing import Any, Callable, NoReturn

from backends import Backend, CkptError, backend_class, backend_names, parse_kv
from experiments.core.spec import ProgressFactory
from workloads import core, placement
from workloads.runner import ClientSettings

from .progress import Display

PROG = "bench"
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A command line that cannot work; printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (no usage dump), and a value
    of the wrong type is described in the user's words: ``type=int`` and ``type=float`` resolve
    to :func:`integer` and :func:`number` (argparse's type registry), so a message never shows a
    Python name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", int, integer)
        self.register("type", float, number)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog.split()[0]}: error: {message} (see {self.prog} --help)\n")


def named(name: str) -> Callable[[Callable[[str], Any]], Callable[[str], Any]]:
    """An ``argparse`` type under a user-facing ``name`` (what argparse shows in "invalid NAME
    value"); a ``ValueError`` or ``OverflowError`` of the wrapped function is reported the same
    way (argparse itself lets ``OverflowError`` through as a traceback)."""

    def wrap(fn: Callable[[str], Any]) -> Callable[[str], Any]:
        @functools.wraps(fn)
        def typed(text: str) -> Any:
            try:
                return fn(text)
            except (ValueError, OverflowError) as exc:
                if isinstance(exc, argparse.ArgumentTypeError):
                    raise
                raise argparse.ArgumentTypeError(f"invalid {name} value: {text!r}") from None

        typed.__name__ = typed.__qualname__ = name
        return typed

    return wrap


def _parse_number(kind: type, text: str) -> Any:
    """``text`` as an ``int`` or a finite ``float``, or an error saying which it is not."""
    what = "an integer" if kind is int else "a number"
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


@named("integer")
def integer(text: str) -> int:
    return _parse_number(int, text)


@named("number")
def number(text: str) -> float:
    """Finite: ``inf`` and ``nan`` would pass every later ``<``/``>`` check or none."""
    return _parse_number(float, text)


def at_least(minimum: int) -> Callable[[str], int]:
    """The ``argparse`` type of an integer ``>= minimum`` (a count, an offset, a seed): a value
    out of range is refused while parsing, before any work starts, rather than running a job
    that cannot end or that silently does nothing."""

    @named(f"integer >= {minimum}")
    def parse(text: str) -> int:
        value = _parse_number(int, text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {text}")
        return value

    return parse


positive_int = at_least(0)
#: a count of things (events, threads, rounds): at least one
count = at_least(1)


@named("proportion")
def proportion(text: str) -> float:
    value = _parse_number(float, text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


@named("number > 0")
def positive_float(text: str) -> float:
    value = _parse_number(float, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


@named("number >= 0")
def non_negative_float(text: str) -> float:
    value = _parse_number(float, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


#: byte-size units: binary (``K``, ``KiB``: 1024) and decimal (``KB``: 1000), any case
_BYTE_UNITS = {"": 1, "b": 1, **{u + s: 1 << (10 * i) for i, u in enumerate("kmgt", 1)
                                  for s in ("", "i", "ib")},
               **{u + "b": 1000 ** i for i, u in enumerate("kmgt", 1)}}


@named("size")
def byte_size(text: str) -> int:
    """A number of bytes: ``1024``, ``16MiB``, ``4GiB``, ``1.5G`` (binary units; ``MB`` and
    ``GB`` decimal), at least one byte."""
    t = text.strip().replace(" ", "")
    number_part = t.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = t[len(number_part):].lower()
    if unit not in _BYTE_UNITS or not number_part:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; give bytes or a number with a "
                                         f"unit, e.g. 1024, 16MiB, 4GiB")
    value = int(_parse_number(float, number_part) * _BYTE_UNITS[unit])
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1 byte")
    return value


@named("fraction")
def fraction_or_percent(text: str) -> float:
    """A share in (0, 1]: ``0.1%``, ``10%``, ``100%``, or the fraction itself (``0.001``, ``1``)."""
    t = text.strip()
    value = _parse_number(float, t[:-1].strip()) / 100 if t.endswith("%") else _parse_number(float, t)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0 and at most 100 %")
    return value


def csv_list(kind: Callable[[str], Any]) -> Any:
    """A comma-separated list of ``kind`` (a type above, so each item is range-checked too)."""

    @named("comma-separated list")
    def parse(text: str) -> list:
        try:
            items = [kind(x) for x in text.split(",") if x.strip()]
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"in {text!r}: {exc}") from None
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        if not items:
            raise argparse.ArgumentTypeError("the list is empty")
        return items
    return parse


def add_backend_args(p: argparse.ArgumentParser, *, random_seed: bool = False,
                     backend_flags: tuple[str, ...] = ("--backend",)) -> None:
    """``--backend``, ``--opt``, ``--durability``, ``--json``, ``--seed``, ``--no-progress``.
    ``random_seed``: ``--seed`` defaults to a fresh random seed (a workload run, as YCSB does)
    rather than 1 (experiments whose values are derived from the seed)."""
    p.add_argument(*backend_flags, dest="backend", required=True, metavar="NAME",
                   help=f"checkpoint store: {', '.join(backend_names())}")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="backend option, repeatable (e.g. --opt path=/data/ckpt); file backends "
                        "default to a fresh temporary directory removed after the run")
    p.add_argument("--durability", metavar="MODE",
                   help="durability mode of the backend (its first mode by default)")
    p.add_argument("--json", metavar="FILE",
                   help="also write machine-readable results here (- for standard output)")
    add_html_arg(p)
    if random_seed:
        p.add_argument("--seed", type=int, default=None,
                       help="random seed (default: a new random seed, printed on stderr)")
    else:
        p.add_argument("--seed", type=int, default=1, help="random seed (default 1: reproducible)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def add_html_arg(p: argparse.ArgumentParser) -> None:
    """``--html FILE``: the result's report page (tables, charts, conditions, command)."""
    p.add_argument("--html", metavar="FILE",
                   help="also write the result's report page here (one self-contained HTML "
                        "file: tables, charts, conditions, command)")


def add_cpus_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpus", metavar="LIST|irq",
                   help="run the whole benchmark process on these CPUs (e.g. 1 or 0,2-3, as "
                        "taskset -c); 'irq': the CPUs taking most of the data disk's interrupts. "
                        "Default: wherever the scheduler puts it")


def add_spec_args(p: argparse.ArgumentParser, spec: core.WorkloadSpec | None) -> None:
    """The workload's YCSB property overrides (shared by a run, ``compare`` and ``sweep``)."""
    dflt = (lambda v: f" (default {v})") if spec is not None else (lambda v: "")
    p.add_argument("--records", type=positive_int,
                   help="records loaded" + dflt(spec.records if spec else None))
    p.add_argument("--ops", type=positive_int,
                   help="operations run" + dflt(spec.operations if spec else None))
    p.add_argument("--duration", type=positive_float, metavar="SECONDS",
                   help="stop the run phase after this long (with --ops: whichever comes first)")
    p.add_argument("--value-size", type=positive_int,
                   help="bytes per value" + dflt(spec.value_size if spec else None))
    p.add_argument("--read-proportion", type=proportion)
    p.add_argument("--update-proportion", type=proportion)
    p.add_argument("--insert-proportion", type=proportion)
    p.add_argument("--scan-proportion", type=proportion)
    p.add_argument("--rmw-proportion", type=proportion, help="read-modify-write proportion")
    p.add_argument("--distribution", "--request-distribution", dest="distribution",
                   choices=core.DISTRIBUTIONS,
                   help="key popularity" + dflt(spec.distribution if spec else None))
    p.add_argument("--max-scan-length", type=positive_int, help="longest scan (default 100)")
    p.add_argument("--threads", type=int, default=1, help="client threads (default 1)")
    p.add_argument("--load-batch", type=int, default=1000, metavar="N",
                   help="keys per put_many in the load phase; 1 = one put per key, measured as "
                        "INSERT like YCSB (default 1000)")


# ------------------------------------------------------------------ from arguments to settings
def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--opt`` and ``--durability`` as backend options, checked before any work starts."""
    return store_and_options(args)[1]


def store_and_options(args: argparse.Namespace) -> tuple[type[Backend], dict[str, Any]]:
    """The class ``--backend`` names, looked up once here and passed on, and the backend
    options of :func:`backend_options`, checked against it."""
    options: dict[str, Any] = dict(parse_kv(args.opt))
    if args.durability is not None:
        if "durability" in options and options["durability"] != args.durability:
            raise UsageError("--durability and --opt durability= disagree; give only one")
        options["durability"] = args.durability
    cls = backend_class(args.backend)  # UnknownBackendError names the valid ones
    cls.parse_options(options)  # BadOptionError before any work starts
    return cls, options


def workload_spec(args: argparse.Namespace) -> core.WorkloadSpec:
    """The preset named by the command, with the command line's overrides."""
    base = core.PRESETS[args.workload]
    overrides = dict(
        records=args.records, operations=args.ops, value_size=args.value_size,
        read=args.read_proportion, update=args.update_proportion,
        insert=args.insert_proportion, scan=args.scan_proportion, rmw=args.rmw_proportion,
        distribution=args.distribution, max_scan_length=args.max_scan_length,
    )
    read_update_only = base.insert == base.scan == base.rmw == 0
    if read_update_only and args.read_proportion is not None and args.update_proportion is None:
        overrides["update"] = max(0.0, 1.0 - args.read_proportion)
    return core.preset(args.workload, **overrides)


def client_settings(args: argparse.Namespace) -> ClientSettings:
    return ClientSettings(threads=args.threads, operations=args.ops, duration=args.duration,
                          target=getattr(args, "target", None), seed=args.seed,
                          load_batch=args.load_batch)


def config(args: argparse.Namespace, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Every option as given, for the JSON's ``config``."""
    out = {k: v for k, v in vars(args).items() if k not in ("func", "opt")}
    out["backend_options"] = dict(options)
    out.update(extra)
    return out


def progress(args: argparse.Namespace) -> ProgressFactory:
    """The command's progress bars on stderr (:mod:`bench.progress`; off with
    ``--no-progress`` or when stderr is not a TTY).  Bars opened while another is open are
    drawn nested under it."""
    return Display(enabled=not getattr(args, "no_progress", False)).bar


def _has_path(backend: str) -> bool:
    """Whether ``backend`` stores files under a ``path`` (``False`` when it cannot be loaded:
    the run reports it)."""
    try:
        return backend_class(backend).keeps_a_directory()
    except CkptError:
        return False


def place(args: argparse.Namespace, backends: list[str], options: dict[str, Any]) -> None:
    """``--cpus``: pin the whole process before any store or client thread starts (they
    inherit it, and so do client processes), and say so on stderr (YCSB's result lines
    carry no settings; the JSON does)."""
    if not getattr(args, "cpus", None):
        return
    data_path = None  # for --cpus irq: the disk that will hold the file backends' data
    given = options.get("path")
    if any(_has_path(b) for b in backends) and "://" not in str(given or ""):
        data_path = str(given) if given else tempfile.gettempdir()
    try:
        cpus = placement.resolve(args.cpus, data_path)
    except placement.PlacementError as exc:
        raise UsageError(str(exc)) from None
    placement.pin(cpus)
    args.cpus_pinned = cpus  # in the JSON's config, beside the --cpus as given
    print(f"{PROG}: running on CPU {placement.format_cpus(cpus)} (--cpus {args.cpus})",
          file=sys.stderr)
