"""Where a benchmark runs: the CPUs it may use (``--cpus``) and where its disk's interrupts land.

Why this exists: on a small VM the cost of a durable put is mostly wake-ups, and a wake-up that
crosses to another vCPU costs far more than one that stays.  A disk's completion interrupts often
all land on one CPU (see ``/proc/interrupts``), and a writer woken there by its ``fdatasync``
costs least.  ``--cpus`` pins the whole benchmark process, like ``taskset -a`` or fio's
``cpus_allowed``, so 1 thread and 16 threads can be compared on one layout; ``--cpus irq``
picks the CPUs that took most of the data disk's interrupts so far.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

IRQ = "irq"  # the --cpus value that means "the CPUs taking the data disk's interrupts"


class PlacementError(ValueError):
    """A ``--cpus`` value that cannot be honoured here (the message names the fix)."""


def allowed() -> list[int]:
    """The CPUs this process may run on now."""
    return sorted(os.sched_getaffinity(0))


def format_cpus(cpus: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (the ``taskset -c`` / cpuset list format)."""
    parts, run = [], []
    for cpu in sorted(cpus) + [None]:
        if run and (cpu is None or cpu != run[-1] + 1):
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            run = []
        if cpu is not None:
            run.append(cpu)
    return ",".join(parts)


def parse_cpus(text: str, available: list[int] | None = None) -> list[int]:
    """A CPU list such as ``1`` or ``0,2-3``, checked against the CPUs this process may use."""
    available = allowed() if available is None else available
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, dash, hi = part.strip().partition("-")
            first, last = int(lo), int(hi if dash else lo)
            if first < 0 or last < first:
                raise ValueError(part)
            cpus.update(range(first, last + 1))
    except ValueError:
        raise PlacementError(f"--cpus {text!r}: expected a CPU list such as 1 or 0,2-3, or "
                             f"{IRQ!r}") from None
    missing = sorted(cpus - set(available))
    if missing:
        raise PlacementError(f"--cpus {text}: CPU {format_cpus(missing)} is not available to "
                             f"this process; fix: pick from {format_cpus(available)}")
    return sorted(cpus)


def pin(cpus: list[int]) -> None:
    """Restrict every thread of this process to ``cpus``; threads started later inherit it.

    (``sched_setaffinity(0, ...)`` alone moves only the calling thread on Linux.)"""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            pass


# ------------------------------------------------------------------------------ disk interrupts
@dataclass
class DiskInterrupts:
    """The interrupts of the block device that holds a directory, per CPU, since boot."""

    device: str
    irqs: list[int]
    per_cpu: dict[int, int]

    def busiest(self) -> list[int]:
        """The CPUs that took at least half as many of these interrupts as the busiest one."""
        top = max(self.per_cpu.values(), default=0)
        return [cpu for cpu, n in sorted(self.per_cpu.items()) if top and 2 * n >= top]


def _existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _device_irqs(sysdir: str) -> list[int]:
    """The IRQ numbers of the hardware device above a block device's sysfs directory: a PCI
    device's MSI vectors (virtio, NVMe, AHCI), else a legacy ``irq`` file."""
    here = sysdir
    while here.startswith("/sys/devices/") and here != "/sys/devices":
        msi = os.path.join(here, "msi_irqs")
        if os.path.isdir(msi):
            return sorted(int(n) for n in os.listdir(msi) if n.isdigit())
        try:
            with open(os.path.join(here, "irq")) as f:
                irq = int(f.read().strip() or 0)
            if irq > 0:
                return [irq]
        except (OSError, ValueError):
            pass
        here = os.path.dirname(here)
    return []


def interrupt_counts(irqs: list[int], text: str | None = None) -> dict[int, int]:
    """Per-CPU totals of ``irqs`` from ``/proc/interrupts`` (or ``text`` in its format)."""
    if text is None:
        with open("/proc/interrupts") as f:
            text = f.read()
    lines = text.splitlines()
    cpus = [int(name[3:]) for name in lines[0].split() if name.startswith("CPU")]
    totals = dict.fromkeys(cpus, 0)
    wanted = {str(irq) for irq in irqs}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        if label.strip() in wanted:
            counts = rest.split()[: len(cpus)]
            for cpu, n in zip(cpus, counts):
                totals[cpu] += int(n)
    return totals


def disk_interrupts(path: str) -> DiskInterrupts | None:
    """Where the interrupts of the disk holding ``path`` land; ``None`` if there is no such
    disk to ask about (tmpfs, a network filesystem, a device-mapper volume, no sysfs)."""
    try:
        dev = os.stat(_existing(path)).st_dev
        sysdir = os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
        if not os.path.isdir(sysdir):
            return None
        if os.path.exists(os.path.join(sysdir, "partition")):
            sysdir = os.path.dirname(sysdir)  # a partition's interrupts are its disk's
        irqs = _device_irqs(sysdir)
        if not irqs:
            return None
        return DiskInterrupts(os.path.basename(sysdir), irqs, interrupt_counts(irqs))
    except (OSError, ValueError, IndexError):
        return None


def resolve(text: str, data_path: str | None) -> list[int]:
    """``--cpus`` as a CPU list: ``irq`` becomes the CPUs busiest with the interrupts of the
    disk holding ``data_path``."""
    if text.strip() != IRQ:
        return parse_cpus(text)
    if data_path is None:
        raise PlacementError(f"--cpus {IRQ}: this backend keeps no data on a local disk; fix: "
                             "give a CPU list, e.g. --cpus 0")
    found = disk_interrupts(data_path)
    busiest = found.busiest() if found else []
    if not busiest:
        raise PlacementError(f"--cpus {IRQ}: cannot tell which CPUs take the interrupts of the "
                             f"disk holding {data_path} (tmpfs, a network filesystem or no "
                             "interrupt counts yet); fix: give a CPU list, e.g. --cpus 0")
    available = allowed()
    usable = [cpu for cpu in busiest if cpu in available]
    if not usable:
        raise PlacementError(f"--cpus {IRQ}: the disk holding {data_path} interrupts CPU "
                             f"{format_cpus(busiest)}, which this process may not use; fix: "
                             f"give a CPU list from {format_cpus(available)}")
    return usable
