"""Node loss: a whole worker host dies while a job runs (``bench spark --fail-node K``).

An injected instance failure (``failAt``) ends one Python worker; a node loss ends a host: every
process on it (Spark worker, executor JVM, Python workers, DataNode) and its local disk.  The
host itself is killed by whoever owns it (:func:`services.cluster.kill_host`, handed in as
``NodeLoss.kill``); this module does the driver's part:

* **When.** From the micro-batch that holds the event offset on, the driver strikes as soon as
  the host runs an operator instance (a task of the keyed stage records it there, below;
  :func:`strike_when_running`), so the host dies with working state on it and, mostly, a task in
  flight.  Spark places tasks on any host with a free core, so a host may run no instance for a
  while: the driver waits up to :data:`HOLD_WAIT_S`, then kills it anyway (its loss then costs
  Spark's own recomputation of what it held, and no protocol recovery); a job that ends first
  ends with the host alive, and says so.
* **What the host held of the job.** The operator instances' working state lives in the job's
  executor-local directory; on this one-machine cluster the hosts share one tmpfs, so each task
  records which host ran it (``i<n>.host``, from ``CKPTBENCH_HOST`` that the cluster's workers
  set, :func:`.operators.record_host`).  The instances whose last task ran on the lost host lost their working
  state with it: the driver drops it and leaves their failure records (the instant of the kill),
  exactly what :mod:`.operators` does for an instance that died alone.  From there recovery is the
  protocol's, as for any failure: the instance's next task, on a surviving host, finds the record,
  and the driver recovers it from the store.  Spark's own executor-local files (shuffle output,
  blocks) are in the host's ``SPARK_LOCAL_DIRS`` and go with its directory.
* **How long Spark takes to notice.** A dead host sends nothing; the master drops its worker when
  the heartbeats stop and tells the driver its executor is lost.  :func:`watch_executor` polls the
  driver's list of executors from the kill until the lost host's is gone: ``executor_lost_s``
  (``Recovery.ExecutorLoss(ms)``).  It overlaps the recovery's phases rather than being one of
  their slices: the job may fail sooner (a task of a lost instance, rescheduled, finds its state
  gone), and until Spark notices, the tasks it still hands the dead host stall whichever phase
  they belong to, the detect phase or the re-run's replay.

Safety: the driver drops an instance's state under the instance's ``flock``; the lost host's
processes are dead (SIGKILL, confirmed gone) before it does, so no task of theirs writes after it.
Dropping the state of an instance that in fact last ran elsewhere costs a recovery, never a wrong
count: any instance the protocol recovers is restored from the store.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .operators import drop_state, host_path, instance_lock, record_failure
from .settings import Settings
#: how long the driver waits for the host to run an instance before killing it anyway (s)
HOLD_WAIT_S = 60.0
#: how long it watches for Spark to drop the lost executor (s)
EXECUTOR_WATCH_S = 300.0
_POLL_S = 0.05


@dataclass
class NodeLoss:
    """One host to kill at ``offset``: ``kill()`` kills it and returns what it killed."""

    offset: int
    address: str
    kill: Callable[[], dict]
    #: filled in when it strikes
    killed_at: float = 0.0
    executor_lost_at: float | None = None
    lost_instances: list[int] = field(default_factory=list)
    killed: dict = field(default_factory=dict)
    #: what went wrong in the striking thread (the driver raises it)
    error: BaseException | None = None
    #: set by the driver when the job ends: a host not killed by then stays alive
    cancel: threading.Event = field(default_factory=threading.Event)

    def describe(self) -> str:
        """One line: the host, what was killed on it, the instances whose state it took."""
        roles: dict[str, int] = {}
        for proc in self.killed.get("killed", ()):
            roles[proc["role"]] = roles.get(proc["role"], 0) + 1
        procs = ", ".join(f"{n} {role}" for role, n in roles.items()) or "no processes"
        lost = ", ".join(map(str, self.lost_instances)) or "none"
        if not self.killed_at:
            return f"h? {self.address}: not killed (the job ended before it ran an instance)"
        return (f"{self.killed.get('host', '?')} {self.address} at offset {self.offset}: killed "
                f"{procs}; deleted {self.killed.get('deleted', '?')}; working state of instances "
                f"{lost} lost")

    @property
    def executor_lost_s(self) -> float | None:
        """Kill -> Spark's driver no longer lists the host's executor (None: not yet, or the
        host ran none)."""
        if self.executor_lost_at is None or not self.killed_at:
            return None
        return max(0.0, self.executor_lost_at - self.killed_at)


def instances_on(settings: Settings, address: str, parallelism: int) -> list[int]:
    """The instances whose last task ran on the host at ``address``."""
    out = []
    for i in range(parallelism):
        with contextlib.suppress(FileNotFoundError):
            with open(host_path(settings, i)) as f:
                if f.read().strip() == address:
                    out.append(i)
    return out


def executor_hosts(spark: Any) -> set[str]:
    """The hosts the driver lists executors on (its own included)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return {info.host() for info in infos}


def strike(spark: Any, settings: Settings, loss: NodeLoss, parallelism: int) -> None:
    """Kill the host now, drop the working state of the instances it ran and leave their failure
    records; then watch until Spark's driver drops the host's executor (module doc)."""
    had_executor = loss.address in executor_hosts(spark)
    loss.killed_at = time.time()
    loss.killed = loss.kill()
    loss.lost_instances = lose_working_state(settings, loss.address, parallelism, loss.killed_at)
    if had_executor:
        watch_executor(spark, loss)


def lose_working_state(settings: Settings, address: str, parallelism: int, at: float) -> list[int]:
    """What the host at ``address`` held of the job is gone: the working state of the instances
    whose last task ran there is dropped and their failure records say ``at``; returns them."""
    lost = instances_on(settings, address, parallelism)
    for i in lost:
        with instance_lock(settings, i):
            drop_state(settings, i)
            record_failure(settings, i, at=at)
    return lost


def watch_executor(spark: Any, loss: NodeLoss) -> None:
    """Poll the driver's executors until the lost host's is gone (``loss.executor_lost_at``)."""
    deadline = time.monotonic() + EXECUTOR_WATCH_S
    while time.monotonic() < deadline:
        try:
            hosts = executor_hosts(spark)
        except Exception:  # noqa: BLE001 - the session ended: nothing left to watch
            return
        if loss.address not in hosts:
            loss.executor_lost_at = time.time()
            return
        time.sleep(_POLL_S)


def strike_when_running(spark: Any, settings: Settings, loss: NodeLoss,
                        parallelism: int) -> threading.Thread:
    """A thread that strikes once the host runs an instance (at most :data:`HOLD_WAIT_S` later;
    never once ``loss.cancel`` is set); the driver goes on with its micro-batches meanwhile."""
    def run() -> None:
        deadline = time.monotonic() + HOLD_WAIT_S
        try:
            while (time.monotonic() < deadline
                   and not instances_on(settings, loss.address, parallelism)):
                if loss.cancel.wait(_POLL_S):
                    return
            strike(spark, settings, loss, parallelism)
        except BaseException as exc:  # noqa: BLE001 - handed to the driver
            loss.error = exc

    thread = threading.Thread(target=run, name="node-loss", daemon=True)
    thread.start()
    return thread
