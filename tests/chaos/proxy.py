"""A TCP proxy on loopback between the workers and the server, that misbehaves on demand.

It runs an asyncio loop in a thread of its own. Faults:

- `latency(seconds)`: every chunk, both ways, waits that long before it is forwarded;
- `drop()`: every open connection is reset at once (clients reconnect);
- `blackhole(seconds)`: nothing is forwarded and new connections hang, for that long;
  then every connection that lived through it is reset (its requests were swallowed);
- `refuse()` ... `accept()`: the server is down: every connection is reset and new ones
  are refused, until `accept()` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

from tests.support.servers import free_port


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.latency = 0.0
        self._blackhole_until = 0.0
        self._conns: set[asyncio.StreamWriter] = set()
        self._made: list[asyncio.BaseTransport] = []  # every one, closed for sure at stop
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._run, name="chaos-proxy", daemon=True)

    # -- control, from any thread ---------------------------------------------------
    def start(self) -> Proxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def set_latency(self, seconds: float) -> None:
        self.latency = seconds

    def drop(self) -> None:
        self._loop.call_soon_threadsafe(self._abort_all)

    def blackhole(self, seconds: float) -> None:
        """Swallow everything for `seconds` (this call returns at once)."""
        self._blackhole_until = time.monotonic() + seconds
        self._loop.call_soon_threadsafe(self._loop.call_later, seconds, self._abort_all)

    def refuse(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)

    def accept(self) -> None:
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)

    def heal(self) -> None:
        self.latency = 0.0
        self._blackhole_until = 0.0

    def stop(self) -> None:
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    # -- the loop ---------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _close(self) -> None:
        server, self._server = self._server, None
        self._abort_all()
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _shutdown(self) -> None:
        """Every connection task is cancelled and awaited, so each closes its sockets
        before the loop stops: a transport left for the garbage collector would warn."""
        await self._close()
        tasks = [t for t in asyncio.all_tasks(self._loop) if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for transport in self._made:
            if not transport.is_closing():
                transport.abort()  # type: ignore[attr-defined]
        await asyncio.sleep(0)  # the aborts close their sockets on the next turn

    def _abort_all(self) -> None:
        for writer in list(self._conns):
            writer.transport.abort()
        self._conns.clear()

    async def _hold(self) -> None:
        while time.monotonic() < self._blackhole_until:
            await asyncio.sleep(0.02)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._made.append(writer.transport)
        try:
            with contextlib.suppress(asyncio.CancelledError):  # cancelled by stop()
                await self._connect(reader, writer)
        finally:
            self._conns.discard(writer)
            writer.transport.abort()

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        blackholed = time.monotonic() < self._blackhole_until
        await self._hold()
        if blackholed:  # a connection made into the hole dies with it
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            return
        self._made.append(up_writer.transport)
        self._conns.update((writer, up_writer))
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, writer), self._pipe(up_reader, writer, up_writer)
            )
        finally:
            self._conns.discard(up_writer)
            up_writer.transport.abort()

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, own: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                if time.monotonic() < self._blackhole_until:
                    await self._hold()
                    break  # swallowed; the connection is reset when the hole closes
                if self.latency:
                    await asyncio.sleep(self.latency)
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (dst, own):
                self._conns.discard(w)
                with contextlib.suppress(Exception):
                    w.transport.abort()
