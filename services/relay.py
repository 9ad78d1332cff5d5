"""A small asyncio TCP relay: ``LISTEN_HOST:LISTEN -> TARGET_HOST:TARGET`` for each map.

Two services use it, each as its own process (``python -m services.relay``):

* ``nfs --rtt MS`` puts it in front of the NFS and MOUNT ports with a delay of ``MS/2`` in each
  direction, to emulate a LAN hop (this kernel has no netem), counting the ONC RPC calls that pass
  client -> server (record-marking headers), e.g. to measure RPCs per operation;
* ``cluster`` puts one on the service host's bridge address in front of each shared server that
  listens on ``127.0.0.1`` (Redis, MinIO, HBase's Thrift gateways), so a worker host, whose
  loopback is its own, reaches them without the servers being restarted or rebound.

Safety: bytes are forwarded as they come, in order, each direction on its own, pipelining kept;
nothing is parsed but the RPC record marks when counting.  A connection the target refuses is
closed at once (the client sees the refusal as a closed connection), and when one side closes
the other is closed after what was already read has been written.  asyncio timers have ~1 ms
resolution.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys
import threading

from .common import ServiceError

HOST = "127.0.0.1"


class Relay:
    """Forward ``listen_host:LISTEN -> target_host:TARGET`` for each ``(LISTEN, TARGET)`` of
    ``maps``, delaying every chunk by ``rtt_ms / 2`` in each direction; with ``count_calls``
    count the ONC RPC calls that pass client -> server in :attr:`calls`."""

    def __init__(self, maps: list[tuple[int, int]], rtt_ms: float = 0.0, *,
                 listen_host: str = HOST, target_host: str = HOST,
                 count_calls: bool = True) -> None:
        self.maps = maps
        self.delay = max(0.0, rtt_ms) / 2000.0
        self.listen_host, self.target_host = listen_host, target_host
        self.count_calls = count_calls
        self.calls = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()

    async def _pump(self, reader, writer, count: bool) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        async def inbound() -> None:
            need, header = 0, b""  # bytes left in the current fragment; partial header
            try:
                while data := await reader.read(1 << 16):
                    if count and self.count_calls:
                        view = memoryview(data)
                        while view:
                            if need:
                                step = min(need, len(view))
                                need -= step
                                view = view[step:]
                                continue
                            take = 4 - len(header)
                            header += bytes(view[:take])
                            view = view[take:]
                            if len(header) == 4:
                                word = int.from_bytes(header, "big")
                                need, header = word & 0x7FFFFFFF, b""
                                if word & 0x80000000:
                                    self.calls += 1
                    queue.put_nowait((loop.time() + self.delay, data))
            except (ConnectionError, OSError):
                pass
            queue.put_nowait((0.0, None))

        async def outbound() -> None:
            try:
                while True:
                    due, data = await queue.get()
                    if data is None:
                        break
                    wait = due - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        await asyncio.gather(inbound(), outbound())

    async def _serve(self) -> None:
        def make_handler(target: int):
            async def handle(creader, cwriter) -> None:
                try:
                    sreader, swriter = await asyncio.open_connection(self.target_host, target)
                except OSError:
                    cwriter.close()
                    return
                for w in (cwriter, swriter):
                    with contextlib.suppress(OSError):
                        w.get_extra_info("socket").setsockopt(
                            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await asyncio.gather(self._pump(creader, swriter, True),
                                     self._pump(sreader, cwriter, False))
            return handle

        servers = [await asyncio.start_server(make_handler(t), self.listen_host, listen,
                                              reuse_address=True)
                   for listen, t in self.maps]
        self._ready.set()
        await asyncio.gather(*(s.serve_forever() for s in servers))

    def run_forever(self) -> None:
        asyncio.run(self._serve())

    def start_in_thread(self) -> "Relay":
        """Run in a daemon thread of this process (tests); returns once listening."""
        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._serve())
        threading.Thread(target=run, name="tcp-relay", daemon=True).start()
        if not self._ready.wait(10):
            raise ServiceError("relay: did not start listening within 10 s")
        return self


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m services.relay",
                                description="relay TCP connections (see services/relay.py)")
    p.add_argument("--rtt", type=float, default=0.0, help="round-trip delay in ms")
    p.add_argument("--map", action="append", required=True, metavar="LISTEN:TARGET")
    p.add_argument("--listen-host", default=HOST)
    p.add_argument("--target-host", default=HOST)
    p.add_argument("--no-count", action="store_true", help="the traffic is not ONC RPC")
    args = p.parse_args(argv)
    maps = [tuple(int(x) for x in m.split(":", 1)) for m in args.map]
    Relay(maps, args.rtt, listen_host=args.listen_host, target_host=args.target_host,
          count_calls=not args.no_count).run_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
