"""Java and Maven for the JVM services (HDFS, HBase): the ``java`` on PATH checked once, and each
service's jars resolved from Maven Central by ``mvn dependency:build-classpath`` from the pom in
its ``services/<name>/`` folder, the classpath cached in the user cache keyed by the pom's
content (so editing the pom re-resolves, and a jar evicted from ``~/.m2`` re-resolves too)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

from .common import ServiceError, cache_dir


def java(service: str, minimum: int = 11) -> str:
    """The ``java`` on PATH if it is Java ``minimum``+; a :class:`ServiceError` naming the fix."""
    exe = shutil.which("java")
    if exe is None:
        raise ServiceError(
            f"{service}: needs Java 17 and `java` is not on PATH; install it with "
            "`apt-get install openjdk-17-jre-headless` (or put a JDK 17 on PATH)"
        )
    out = subprocess.run([exe, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    major = int(match.group(1)) if match else 0
    if major < minimum:
        raise ServiceError(
            f"{service}: {exe} is Java {major or '?'}; it needs Java {minimum}+ (17 tested); "
            "install `openjdk-17-jre-headless` and put it first on PATH"
        )
    return exe


def classpath_file(service: str, version: str, pom: Path) -> Path:
    """Where the resolved classpath is cached, keyed by the pom's content (an edit re-resolves)."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return cache_dir(service, version) / f"classpath-{digest}.txt"


def read_classpath(path: Path) -> str | None:
    """The cached classpath if every jar in it is still in the Maven cache."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    jars = text.split(":")
    if not text or not all(Path(j).is_file() for j in jars):
        return None
    return text


def resolve_classpath(service: str, version: str, pom: Path, log: Callable[[str], None],
                      size_hint: str) -> None:
    """``mvn dependency:build-classpath`` into the cache unless a complete one is there."""
    java(service)
    target = classpath_file(service, version, pom)
    if read_classpath(target) is not None:
        log(f"{service} {version}: already installed ({target})")
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServiceError(
            f"{service}: needs Maven to fetch its jars from Maven Central and `mvn` is not on "
            "PATH; install it with `apt-get install maven`"
        )
    tmp = target.with_suffix(".tmp")
    log(f"{service} {version}: resolving jars from Maven Central (first time: {size_hint})")
    started = time.monotonic()
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), "dependency:build-classpath",
         f"-Dmdep.outputFile={tmp}"],
        capture_output=True, text=True,
    )
    if proc.returncode != 0 or not tmp.is_file():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ServiceError(
            f"{service}: `mvn dependency:build-classpath` failed (exit {proc.returncode}); is "
            f"Maven Central reachable (proxy settings in ~/.m2/settings.xml)?\n{tail}"
        )
    tmp.replace(target)
    log(f"{service} {version}: installed in {time.monotonic() - started:.0f}s ({target})")
