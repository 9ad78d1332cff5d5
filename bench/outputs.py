"""Output paths of every ``bench`` command, checked before any work starts: a finished run must
never lose its results to a path it cannot write (a typo, a missing directory, ``/proc``)."""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

from .args import UsageError


#: parsed-argument names that hold a file a command writes, and those that hold a directory it
#: writes into; every command's are checked by :func:`check_outputs` before it runs
OUTPUT_FILES = ("json", "csv", "plot", "png", "html")
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
        if name == "json" and value == "-":  # standard output (results.write_json)
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


def save(args: argparse.Namespace, document: Any, *, page_beside: bool = False) -> None:
    """Write ``document`` where the command's options ask: its JSON to ``--json`` and its page
    (:mod:`experiments.report.page`) to ``--html``; with ``page_beside`` (an experiment whose
    JSON has a default place) the page also goes beside the JSON, ``NAME.json`` -> ``NAME.html``.
    The one way every command writes its result, so every result can have its page."""
    from experiments.core.results import write_json

    json_path = getattr(args, "json", None)
    if json_path:
        write_json(json_path, document)
    save_page(args, document, page_beside=page_beside)


def save_page(args: argparse.Namespace, document: Any, *, page_beside: bool = False) -> None:
    """The page part of :func:`save`, for a command whose JSON is written its own way."""
    from experiments.report import page

    json_path = getattr(args, "json", None)
    html = getattr(args, "html", None)
    if not html and page_beside and json_path and json_path != "-":
        html = page.beside(json_path)
    if html:
        source = os.path.basename(json_path) if json_path and json_path != "-" else "result"
        page.write_page(html, [(source, document)], f"ckptbench: {source}")
