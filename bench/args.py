"""Argument pieces every ``bench`` command shares: the one-line usage error, value types, and
the backend and ``--cpus`` options.  Commands' own parsers live beside their commands."""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import tempfile
from typing import Any, Callable, NoReturn

from backends import CkptError, backend_class, backend_names, parse_kv
from experiments.spec import Bar, ProgressFactory
from workloads import core, placement
from workloads.runner import ClientSettings

from .progress import ProgressBar

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


def add_backend_args(p: argparse.ArgumentParser, *, random_seed: bool = False) -> None:
    """``--backend``, ``--opt``, ``--durability``, ``--json``, ``--seed``, ``--no-progress``.
    ``random_seed``: ``--seed`` defaults to a fresh random seed (a workload run, as YCSB does)
    rather than 1 (experiments whose values are derived from the seed)."""
    p.add_argument("--backend", required=True, metavar="NAME",
                   help=f"checkpoint store: {', '.join(backend_names())}")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="backend option, repeatable (e.g. --opt path=/data/ckpt); file backends "
                        "default to a fresh temporary directory removed after the run")
    p.add_argument("--durability", metavar="MODE",
                   help="durability mode of the backend (its first mode by default)")
    p.add_argument("--json", metavar="FILE", help="also write machine-readable results here")
    if random_seed:
        p.add_argument("--seed", type=int, default=None,
                       help="random seed (default: a new random seed, printed on stderr)")
    else:
        p.add_argument("--seed", type=int, default=1, help="random seed (default 1: reproducible)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


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
    options: dict[str, Any] = dict(parse_kv(args.opt))
    if args.durability is not None:
        if "durability" in options and options["durability"] != args.durability:
            raise UsageError("--durability and --opt durability= disagree; give only one")
        options["durability"] = args.durability
    cls = backend_class(args.backend)  # UnknownBackendError names the valid ones
    cls.parse_options(options)  # BadOptionError before any work starts
    return options


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
    """Progress bars on stderr (off with ``--no-progress`` or when stderr is not a TTY)."""
    enabled = not getattr(args, "no_progress", False)

    def bar(label: str, total: int | None) -> Bar:
        return ProgressBar(label, total, enabled=enabled)

    return bar


def _has_path(backend: str) -> bool:
    """Whether ``backend`` stores files under a ``path`` (``False`` when it cannot be loaded:
    the run reports it)."""
    try:
        return "path" in backend_class(backend).all_options()
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


# ------------------------------------------------------------------------------- output paths
#: parsed-argument names that hold a file a command writes, and those that hold a directory it
#: writes into; every command's are checked by :func:`check_outputs` before it runs
OUTPUT_FILES = ("json", "csv", "plot", "png")
OUTPUT_DIRS = ("out",)
#: the directory ``bench`` owns (relative to the working directory): it, and directories inside
#: it, are created when missing; any other output directory must exist already
OWN_RESULTS_DIR = "results"


def check_outputs(args: argparse.Namespace) -> None:
    """Every output path of ``args`` is writable before any work starts, so that a finished run
    never loses its results to a typo: a file's directory must exist (nothing is created
    silently, except under :data:`OWN_RESULTS_DIR`, whose missing directories are created for
    an output file once every path passed) and the file must not be a directory; an output
    directory must be one.
    Raises :class:`UsageError` naming the option and the fix."""
    own_missing: list[str] = []
    for name in OUTPUT_FILES + OUTPUT_DIRS:
        value = getattr(args, name, None)
        if not isinstance(value, str):  # absent, or a flag of the same name (services --json)
            continue
        flag = "--" + name.replace("_", "-")
        if name in OUTPUT_DIRS:
            path = _output_path(flag, value)
            if os.path.exists(path) and not os.path.isdir(path):
                raise UsageError(f"{_given(flag, value)} is a file, not a directory; give a "
                                 f"directory")
            # the command creates its own directory (``bench reproduce --list`` none at all)
            _check_directory(flag, value, path, "an existing directory", [])
        else:
            _check_file(flag, value, _suffix(name), own_missing)
    for directory in own_missing:
        os.makedirs(directory, exist_ok=True)


def check_output_file(flag: str, value: str, suffix: str) -> None:
    """The one output file ``value`` that is not an option :func:`check_outputs` knows (YCSB's
    ``-p exportfile=``) can be written, checked the same way before the run; ``flag`` names it
    in the message, ``suffix`` is the file name extension of the example given."""
    own_missing: list[str] = []
    _check_file(flag, value, suffix, own_missing)
    for directory in own_missing:
        os.makedirs(directory, exist_ok=True)


def _given(flag: str, value: str) -> str:
    """``flag`` and ``value`` as the user typed them (``--json FILE``, ``-p exportfile=FILE``)."""
    return flag + value if flag.endswith("=") else f"{flag} {value}"


def _output_path(flag: str, value: str) -> str:
    if not value.strip():
        raise UsageError(f"{flag} is empty; give a path")
    return os.path.abspath(os.path.expanduser(value))


def _check_file(flag: str, value: str, suffix: str, own_missing: list[str]) -> None:
    """The output file ``value`` of ``flag`` can be written (see :func:`check_outputs`)."""
    path = _output_path(flag, value)
    if os.path.isdir(path):
        raise UsageError(f"{_given(flag, value)} is a directory; give a file name in it, "
                         f"e.g. {_given(flag, os.path.join(value, 'results.' + suffix))}")
    _check_directory(flag, value, os.path.dirname(path), "a path in an existing directory",
                     own_missing)
    problem = _cannot_write(path) if os.path.exists(path) else None
    if problem:
        raise UsageError(f"{_given(flag, value)} is not writable ({problem}); fix its "
                         f"permissions or give another path")


def _cannot_create_in(directory: str) -> str | None:
    """Why no file can be created in ``directory`` (an existing one), or ``None``: found by
    creating and removing a hidden empty file, as the results are written (a temporary file
    renamed into place).  Asking ``os.access`` is not enough: it answers yes to root for a
    read-only mount or a pseudo file system such as ``/proc``, where the write still fails."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".bench-probe-", dir=directory)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(probe)
    return None


def _cannot_write(path: str) -> str | None:
    """Why the existing file ``path`` cannot be opened for writing, or ``None`` (it is opened
    to append, which leaves its content as it is)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _suffix(name: str) -> str:
    return {"plot": "png"}.get(name, name)


def _check_directory(flag: str, value: str, directory: str, instead: str,
                     own_missing: list[str]) -> None:
    """``directory`` (where ``flag``'s output goes) exists and is writable, or is bench's own
    (then appended to ``own_missing``); ``instead`` is what to give in its place."""
    if os.path.isdir(directory):
        problem = _cannot_create_in(directory)
        if problem:
            raise UsageError(f"{_given(flag, value)}: cannot create a file in {directory} "
                             f"({problem}); give a path in a writable directory")
        return
    if os.path.exists(directory):
        raise UsageError(f"{_given(flag, value)}: {directory} is a file, not a directory; "
                         f"give {instead}")
    own = os.path.abspath(OWN_RESULTS_DIR)
    if directory == own or directory.startswith(own + os.sep):
        _check_directory(flag, value, os.path.dirname(directory), instead, own_missing)
        own_missing.append(directory)
        return
    raise UsageError(f"{_given(flag, value)}: directory {directory} does not exist; create it "
                     f"first (mkdir -p {directory}) or give {instead}")
