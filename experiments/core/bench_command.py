"""One ``bench`` command run as a child process, its output kept in a log: how an experiment
made of commands runs each of them (``bench reproduce``'s steps, ``bench state-sweep``'s points).

The command runs as ``python -m bench ARGV`` with the interpreter running this one, in a session
of its own, so that a timeout or a Ctrl-C stops everything it started (client processes, a
Spark JVM and its Python workers) and nothing outlives it.  Its standard output goes to the log
as it runs; its standard error is kept to name the failure (its last line, which is the
command's one-line error) and then appended to the log, so the log holds the whole run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Ran:
    """How a command ended: its exit status (``None``: never ended), its wall time, and the line
    that says why it failed (``None`` when it succeeded)."""

    returncode: int | None
    seconds: float
    error: str | None


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def stop(proc: subprocess.Popen) -> None:
    """SIGKILL a command's whole session: the processes it started (client processes, a JVM) too."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_bench(argv: list[str], log: str, timeout: float, env: dict[str, str] | None = None) -> Ran:
    """Run ``bench ARGV`` into ``log`` (its directory must exist); stopped after ``timeout``
    seconds, and with this process when it is interrupted; ``env``: variables set for it."""
    t0 = time.monotonic()
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "bench", *argv], stdout=fh,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env={**os.environ, **env} if env else None)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            err = (proc.stderr.read() if proc.stderr else "") + f"\ntimed out after {timeout:.0f} s"
        except BaseException:  # Ctrl-C: the command and everything it started stop with us
            stop(proc)
            raise
        fh.write(err)
    error = None if proc.returncode == 0 else (last_line(err) or f"exit status {proc.returncode}")
    return Ran(proc.returncode, round(time.monotonic() - t0, 3), error)
