"""Spark standalone: one master and one worker on 127.0.0.1, from the pyspark installation.

Nothing is downloaded: pip's ``pyspark`` ships the full Spark jars and ``bin/spark-class``, which
runs the standalone ``Master`` and ``Worker`` like a Spark distribution does (Java from PATH).
Jobs then run on a real cluster — a separate executor JVM launched by the worker, reaching the
driver and the backends over TCP — with ``--master spark://127.0.0.1:PORT``
(``client_options`` returns it as ``{"master": ...}``)::

    bench services up spark            # master on 7077, a worker with every core, 2 GiB
    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master spark://127.0.0.1:7077 ...

The master's pid is the service's pid file; the worker has its own (``worker/pid``) and logs in
``worker/logs``. Web UIs bind ephemeral ports (``--webui-port 0``), so only the master port is
fixed; the worker is ready once its log says it registered with the master.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from .common import (
    ServiceContext,
    ServiceError,
    kill_pid,
    load_options,
    port_open,
    require_port_free,
    save_options,
    spawn,
    stop_pid,
    wait_until,
)

NAME = "spark"
HOST = "127.0.0.1"
DEFAULT_PORT = 7077
DEFAULT_MEMORY = "2g"
REGISTERED = "Successfully registered with master"


def spark_home() -> Path:
    try:
        import pyspark
    except ImportError:
        raise ServiceError("spark: pyspark is not installed; install the Spark extra: "
                           "pip install -e '.[spark]'") from None
    return Path(pyspark.__file__).resolve().parent


def install(log) -> None:
    """Nothing to fetch: check that pyspark's ``spark-class`` and a Java runtime are there."""
    spark_class = spark_home() / "bin" / "spark-class"
    if not spark_class.exists():
        raise ServiceError(f"spark: {spark_class} is missing; reinstall pyspark")
    if not shutil.which("java"):
        raise ServiceError("spark: no `java` on PATH; install a JRE, e.g. "
                           "`sudo apt-get install -y openjdk-17-jre-headless`")


def _worker_ctx(ctx: ServiceContext) -> ServiceContext:
    worker = ServiceContext("spark-worker", ctx.root / "worker")
    worker.data_dir.mkdir(parents=True, exist_ok=True)
    worker.log_dir.mkdir(parents=True, exist_ok=True)
    return worker


def _env(ctx: ServiceContext) -> dict[str, str]:
    return daemon_env(ctx.log_dir)


def daemon_env(log_dir: Path, local_ip: str = HOST, memory: str = "512m") -> dict[str, str]:
    """The environment of a master or worker (``spark-class``): Spark from pyspark, bound to
    ``local_ip``, a ``memory`` heap, logs in ``log_dir``."""
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": local_ip,
            "SPARK_DAEMON_MEMORY": memory, "SPARK_LOG_DIR": str(log_dir),
            # executors' Python workers: this interpreter (numpy, pyarrow, this project)
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}


def _options(ctx: ServiceContext) -> dict:
    opts = {"port": DEFAULT_PORT, "cores": os.cpu_count() or 1, "memory": DEFAULT_MEMORY}
    opts.update(load_options(ctx))
    return opts


def registered(worker: ServiceContext) -> bool:
    try:
        return REGISTERED in (worker.log_dir / f"{worker.name}.log").read_text(errors="replace")
    except OSError:
        return False


def start(ctx: ServiceContext, port: int | None = None, **_ignored: Any) -> dict:
    """Start (or reuse) the master, then the worker; wait until the worker has registered."""
    opts = _options(ctx)
    spark_class = str(spark_home() / "bin" / "spark-class")
    if ctx.read_pid() is not None:
        if port is not None and int(port) != int(opts["port"]):
            raise ServiceError(f"spark: already running on {HOST}:{opts['port']}; run "
                               f"`bench services down spark` first to move it to port {port}")
    else:
        opts["port"] = int(port or DEFAULT_PORT)
        require_port_free(NAME, HOST, opts["port"], wait=5)
        save_options(ctx, opts)
        spawn(ctx, [spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST,
                    "--port", str(opts["port"]), "--webui-port", "0"], env=_env(ctx))
        wait_until(ctx, lambda: port_open(HOST, opts["port"]), 120, f"spark master on {HOST}:{opts['port']}")
    worker = _worker_ctx(ctx)
    if worker.read_pid() is None:
        (worker.log_dir / f"{worker.name}.log").unlink(missing_ok=True)  # readiness reads it
        spawn(worker, [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://{HOST}:{opts['port']}",
                       "--host", HOST, "--cores", str(opts["cores"]), "--memory", str(opts["memory"]),
                       "--webui-port", "0", "--work-dir", str(worker.data_dir)], env=_env(ctx))
        wait_until(worker, lambda: registered(worker), 120, "spark worker registration")
    return status(ctx)


def stop(ctx: ServiceContext) -> None:
    stop_pid(_worker_ctx(ctx))
    stop_pid(ctx)


def kill(ctx: ServiceContext) -> None:
    """SIGKILL worker and master."""
    kill_pid(_worker_ctx(ctx))
    kill_pid(ctx)


def status(ctx: ServiceContext) -> dict:
    opts = _options(ctx)
    worker = _worker_ctx(ctx)
    out: dict[str, Any] = {"name": NAME, "running": False, "pid": ctx.read_pid(),
                           "address": f"spark://{HOST}:{opts['port']}", "version": None,
                           "settings": {"worker_pid": worker.read_pid(), "cores": opts["cores"],
                                        "memory": opts["memory"]}}
    try:
        import pyspark

        out["version"] = pyspark.__version__
    except ImportError:
        out["error"] = "pyspark is not installed"
    if out["pid"] is None:
        return out
    out["running"] = port_open(HOST, int(opts["port"])) and worker.read_pid() is not None
    if not out["running"]:
        out["error"] = "the master does not answer" if worker.read_pid() else "no worker is running"
    return out


def client_options(ctx: ServiceContext, namespace: str) -> dict:
    """``{"master": "spark://127.0.0.1:PORT"}`` (a cluster has no per-run namespace)."""
    return {"master": f"spark://{HOST}:{int(_options(ctx)['port'])}"}
