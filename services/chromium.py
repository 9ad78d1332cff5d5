"""Debian's Chromium, headless: load a page as a reader's browser would and say what it showed.

:func:`install` puts Debian's ``chromium`` package on the machine (root only; idempotent: a
machine that has it is left as it is, and apt keeps the downloaded package in its own cache).
:func:`load_page` starts a private headless Chromium (its own empty profile in a temporary
directory, removed after) and drives it through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: JSON messages separated by NUL bytes on file descriptors 3 and 4),
so no port is opened and no client library is needed.  It reports every image the page holds
(decoded or not, its natural size), every console error, uncaught exception and error log
entry, and every network request that was not the page itself or inline data: what a test
needs to say "the page loads offline, shows every chart, and has no console errors".

The browser is started with the flags that keep it from reaching out (no background networking,
component updates or sync), so a machine without a network answers as fast as one with it.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import ServiceError, apt_install

PACKAGE = "chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe")

#: evaluated in the page once it has loaded: every image, after waiting for it to decode
_IMAGES_JS = """Promise.all([...document.images].map(img => img.decode().then(() => true,
  () => false).then(decoded => ({alt: img.alt, decoded, complete: img.complete,
  natural_width: img.naturalWidth, natural_height: img.naturalHeight,
  width: img.getBoundingClientRect().width, height: img.getBoundingClientRect().height}))))"""


class ChromiumError(ServiceError):
    """Chromium is missing, cannot be installed, or did not load the page; the message says
    what to do."""


def executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def install(log=print) -> None:
    """``apt-get install chromium`` when it is missing (root only); idempotent."""
    if executable():
        return
    apt_install("chromium", [PACKAGE], log, ChromiumError)
    if not executable():
        raise ChromiumError("chromium: apt-get finished but chromium is not on PATH")


@dataclass
class PageLoad:
    """What a page showed: its images, its errors, and the requests it made beyond itself."""

    title: str = ""
    images: list[dict[str, Any]] = field(default_factory=list)
    #: console errors, uncaught exceptions and error log entries, as text
    errors: list[str] = field(default_factory=list)
    #: URLs requested that were neither the page nor inline (``data:``) content
    requests: list[str] = field(default_factory=list)


class _Pipe:
    """The DevTools protocol over Chromium's pipe: numbered commands, their answers, events."""

    def __init__(self, proc: subprocess.Popen, to_browser: int, from_browser: int) -> None:
        self.proc, self.out, self.inp = proc, to_browser, from_browser
        self.buffer, self.next_id = b"", 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, deadline: float = 0.0) -> dict[str, Any]:
        """Send a command and wait for its answer (events that arrive meanwhile are kept)."""
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.out, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise ChromiumError(f"chromium: {method} failed: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, deadline: float) -> dict[str, Any]:
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        while True:
            ev = self._read(deadline)
            if ev.get("method") == method:
                return ev
            self.events.append(ev)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChromiumError("chromium: no answer from the browser in time")
            ready, _, _ = select.select([self.inp], [], [], left)
            if ready:
                chunk = os.read(self.inp, 1 << 20)
                if not chunk:
                    raise ChromiumError(f"chromium: the browser exited ({self.proc.poll()})")
                self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(raw)


def load_page(path: str | os.PathLike, timeout: float = 30.0) -> PageLoad:
    """Open ``path`` (a local file, as ``file://``) in a private headless Chromium and report
    what it showed (:class:`PageLoad`).  :class:`ChromiumError` when Chromium is missing or
    does not answer within ``timeout`` seconds."""
    exe = executable()
    if exe is None:
        raise ChromiumError("chromium is not installed; `apt-get install -y chromium` "
                            "(services.chromium.install does it as root)")
    url = Path(path).resolve().as_uri()
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="ckptbench-chromium-") as profile:
        # fd 3: commands to the browser, fd 4: its answers (the pipe protocol's numbers)
        cmd_r, cmd_w = os.pipe()
        ans_r, ans_w = os.pipe()
        os.set_inheritable(cmd_r, True)
        os.set_inheritable(ans_w, True)
        proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=lambda: _as_fds_3_and_4(cmd_r, ans_w),
            start_new_session=True)
        os.close(cmd_r)
        os.close(ans_w)
        pipe = _Pipe(proc, cmd_w, ans_r)
        try:
            return _inspect(pipe, url, deadline)
        finally:
            try:
                pipe.send("Browser.close", deadline=time.monotonic() + 5)
            except (ChromiumError, OSError):
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            os.close(cmd_w)
            os.close(ans_r)


def _as_fds_3_and_4(commands: int, answers: int) -> None:
    """In the child: the pipe's ends as fds 3 and 4 (copied first, in case either is 3 or 4)."""
    a, b = os.dup(commands), os.dup(answers)
    os.dup2(a, 3)
    os.dup2(b, 4)


def _inspect(pipe: _Pipe, url: str, deadline: float) -> PageLoad:
    target = pipe.send("Target.createTarget", {"url": "about:blank"}, deadline=deadline)
    session = pipe.send("Target.attachToTarget", {"targetId": target["targetId"],
                                                  "flatten": True}, deadline=deadline)["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        pipe.send(f"{domain}.enable", session=session, deadline=deadline)
    pipe.events.clear()  # what about:blank did is not the page's
    pipe.send("Page.navigate", {"url": url}, session=session, deadline=deadline)
    pipe.wait_event("Page.loadEventFired", deadline)
    images = pipe.send("Runtime.evaluate", {"expression": _IMAGES_JS, "awaitPromise": True,
                                            "returnByValue": True}, session=session,
                       deadline=deadline)["result"].get("value") or []
    title = pipe.send("Runtime.evaluate", {"expression": "document.title", "returnByValue": True},
                      session=session, deadline=deadline)["result"].get("value") or ""
    load = PageLoad(title=title, images=images)
    for ev in pipe.events:
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            load.errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                      for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            load.errors.append("exception: " + str(details.get("exception", {}).get(
                "description") or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            load.errors.append("log: " + params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            requested = params.get("request", {}).get("url", "")
            if requested != url and not requested.startswith("data:"):
                load.requests.append(requested)
    return load
