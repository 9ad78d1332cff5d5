"""The sync gate: run a program so that its ``sync(2)`` and ``syncfs(2)`` reach the lossy mount.

Why it exists: the kernel never tells a FUSE file system about ``sync``/``syncfs`` (it sends
``FUSE_SYNCFS`` to virtiofs only), so a program whose durability rests on a global sync, as
MinIO's does with ``MINIO_FS_OSYNC=on``, would look as if it never synced.  The gate makes the
call visible without changing the program: it starts the program under ``ptrace`` with a seccomp
filter that stops it at the entry of those two system calls (and nowhere else), asks the lossy
file system to make everything durable (its ``sync`` command), and only then lets the call go on.

Safety argument: the traced thread is stopped at the call's entry until the lossy file system
has answered, so when ``sync`` returns in the program, everything written before it was called
is durable, which is what ``sync(2)`` promises on a real disk.  Writes other threads make while
the gate waits may become durable too; a real ``sync`` may also take those, so that is no
stronger than the kernel.  A ``sync`` that comes after a power cut persists nothing (the daemon
is down) and the program is killed by the audit anyway.

Mechanics (Linux, x86-64 and arm64): the child sets ``PR_SET_NO_NEW_PRIVS``, installs a seccomp
filter returning ``SECCOMP_RET_TRACE`` for ``sync``/``syncfs``, calls ``PTRACE_TRACEME`` and
execs the program.  The gate follows every thread and child (``PTRACE_O_TRACECLONE``/``FORK``/``EXEC``),
passes every signal on unchanged, ends the program with itself (``PTRACE_O_EXITKILL``), forwards
SIGTERM and SIGINT to it, and exits with its status.  Only the two gated calls and signals stop
the program, so the cost is a round trip per ``sync``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import signal
import struct
import sys
from typing import Callable

# prctl / seccomp
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_TRACE = 0x7FF00000
# ptrace
_PTRACE_TRACEME = 0
_PTRACE_CONT = 7
_PTRACE_SETOPTIONS = 0x4200
_OPTIONS = (0x02 | 0x04 | 0x08  # TRACEFORK, TRACEVFORK, TRACECLONE
            | 0x10  # TRACEEXEC: an exec is an event stop, not a SIGTRAP the program would get
            | 0x80  # TRACESECCOMP
            | 0x100000)  # EXITKILL
_EVENT_SECCOMP = 7
_WALL = 0x40000000

#: machine -> (AUDIT_ARCH_*, syscall numbers of sync and syncfs)
_ARCH = {"x86_64": (0xC000003E, 162, 306), "aarch64": (0xC00000B7, 81, 267)}


class SyncGateError(OSError):
    """The program cannot be run under the gate here (the message names why)."""


def supported() -> str | None:
    """``None`` if the gate can run here, else the reason it cannot."""
    if sys.platform != "linux":
        return "the sync gate needs Linux (ptrace and seccomp)"
    if platform.machine() not in _ARCH:
        return f"the sync gate knows the system call numbers of {', '.join(_ARCH)} only"
    return None


def _filter() -> bytes:
    """The seccomp BPF program: stop (trace) ``sync`` and ``syncfs``, allow everything else."""
    arch, nr_sync, nr_syncfs = _ARCH[platform.machine()]
    ld_abs, jeq, ret = 0x20, 0x15, 0x06

    def op(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    return b"".join([
        op(ld_abs, 0, 0, 4),             # 0: A = seccomp_data.arch
        op(jeq, 0, 3, arch),             # 1: another ABI -> allow
        op(ld_abs, 0, 0, 0),             # 2: A = seccomp_data.nr
        op(jeq, 2, 0, nr_sync),          # 3: sync -> trace
        op(jeq, 1, 0, nr_syncfs),        # 4: syncfs -> trace
        op(ret, 0, 0, _SECCOMP_RET_ALLOW),  # 5
        op(ret, 0, 0, _SECCOMP_RET_TRACE),  # 6
    ])


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                           ctypes.c_ulong]
    return libc


def _child(libc: ctypes.CDLL, argv: list[str]) -> None:
    """In the forked child: filter, trace me, exec.  Never returns."""
    try:
        program = _filter()
        buf = ctypes.create_string_buffer(program, len(program))
        fprog = struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(buf))
        fbuf = ctypes.create_string_buffer(fprog, len(fprog))
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.ptrace(_PTRACE_TRACEME, 0, None, None) != 0:
            raise OSError(ctypes.get_errno(), "ptrace(PTRACE_TRACEME)")
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fbuf), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"sync gate: cannot start {argv[0]}: {exc}\n".encode())
    os._exit(127)


def run(argv: list[str], on_sync: Callable[[], None]) -> int:
    """Run ``argv`` under the gate, calling ``on_sync()`` at each ``sync``/``syncfs`` before the
    call proceeds; returns the program's exit status (128 + signal if a signal ended it)."""
    reason = supported()
    if reason:
        raise SyncGateError(errno.ENOSYS, reason)
    libc = _libc()
    pid = os.fork()
    if pid == 0:
        _child(libc, argv)

    def forward(signum: int, _frame) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)

    def cont(tid: int, sig: int = 0) -> None:
        if libc.ptrace(_PTRACE_CONT, tid, None, sig) != 0:
            err = ctypes.get_errno()
            if err != errno.ESRCH:  # a thread that has just died is no error
                raise OSError(err, f"ptrace(PTRACE_CONT, {tid})")

    known: set[int] = {pid}
    started = False
    while True:
        try:
            tid, status = os.waitpid(-1, _WALL)
        except ChildProcessError:
            return 1
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            known.discard(tid)
            if tid == pid:
                return os.WEXITSTATUS(status) if os.WIFEXITED(status) \
                    else 128 + os.WTERMSIG(status)
            continue
        if not os.WIFSTOPPED(status):
            continue
        sig, event = os.WSTOPSIG(status), status >> 16
        if not started and tid == pid and sig == signal.SIGTRAP:
            # the stop at exec (PTRACE_TRACEME): from here on, follow threads and gate syncs
            started = True
            if libc.ptrace(_PTRACE_SETOPTIONS, pid, None, _OPTIONS) != 0:
                os.kill(pid, signal.SIGKILL)
                raise OSError(ctypes.get_errno(), "ptrace(PTRACE_SETOPTIONS)")
            cont(tid)
        elif sig == signal.SIGTRAP and event == _EVENT_SECCOMP:
            on_sync()
            cont(tid)
        elif sig == signal.SIGTRAP and event:
            cont(tid)  # clone/fork/vfork/exec: new tasks are followed automatically
        elif sig == signal.SIGSTOP and tid not in known:
            known.add(tid)  # a new thread or child starts with this stop: not a real signal
            cont(tid)
        else:
            known.add(tid)
            cont(tid, sig)  # a signal on its way to the program: deliver it unchanged
