"""Argument pieces every ``bench`` command shares: the one-line usage error, value types, and
the backend and ``--cpus`` options.  Commands' own parsers live beside their commands."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from backends import backend_names

PROG = "bench"
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A command line that cannot work; printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog.split()[0]}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def proportion(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def csv_list(kind: type) -> Any:
    def parse(text: str) -> list:
        try:
            items = [kind(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        if not items:
            raise argparse.ArgumentTypeError("the list is empty")
        return items
    return parse


def add_backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", required=True, metavar="NAME",
                   help=f"checkpoint store: {', '.join(backend_names())}")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="backend option, repeatable (e.g. --opt path=/data/ckpt); file backends "
                        "default to a fresh temporary directory removed after the run")
    p.add_argument("--durability", metavar="MODE",
                   help="durability mode of the backend (its first mode by default)")
    p.add_argument("--json", metavar="FILE", help="also write machine-readable results here")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1: reproducible)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def add_cpus_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpus", metavar="LIST|irq",
                   help="run the whole benchmark process on these CPUs (e.g. 1 or 0,2-3, as "
                        "taskset -c); 'irq': the CPUs taking most of the data disk's interrupts. "
                        "Default: wherever the scheduler puts it")
