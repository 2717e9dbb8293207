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
import socket
import threading
import time

from tasuki.testing.servers import free_port


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.latency = 0.0
        self._blackhole_until = 0.0
        self._conns: set[asyncio.StreamWriter] = set()
        self._made: list[asyncio.BaseTransport] = []  # every one, closed for sure at stop
        self._handlers: set[asyncio.Task[None]] = set()  # one task per connection
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._listener: socket.socket | None = None
        self._accepted: list[socket.socket] = []  # every one, closed for sure at stop
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
        """Accept connections ourselves (not `asyncio.start_server`): a socket is ours from
        the moment it is accepted, so every one is closed at stop. asyncio's server hands
        an accepted socket to a task of its own first, and one accepted as the server
        closes is then never served nor closed (its client hangs; the socket warns when
        collected, an error in the tests). `sock_accept` has the same gap: a task
        cancelled just after its accept drops the socket."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        listener.setblocking(False)
        self._listener = listener
        self._loop.add_reader(listener.fileno(), self._accept, listener)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # nothing more to accept (or closed)
                return
            conn.setblocking(False)
            self._accepted.append(conn)
            self._handlers.add(self._loop.create_task(self._adopt(conn)))

    async def _adopt(self, conn: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=conn)
            self._made.append(writer.transport)
            await self._serve(reader, writer)
        finally:
            self._handlers.discard(asyncio.current_task())  # type: ignore[arg-type]

    async def _close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            self._loop.remove_reader(listener.fileno())
            listener.close()
        self._abort_all()

    async def _shutdown(self) -> None:
        """Every connection closes its sockets before the loop stops: a socket left for the
        garbage collector warns (an error in the test suite)."""
        await self._close()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        for transport in self._made:
            if not transport.is_closing():
                transport.abort()  # type: ignore[attr-defined]
        await asyncio.sleep(0)  # the aborts close their sockets on the next turn
        for conn in self._accepted:
            conn.close()  # one whose task was cancelled before it made a transport

    def _abort_all(self) -> None:
        for writer in list(self._conns):
            writer.transport.abort()
        self._conns.clear()

    async def _hold(self) -> None:
        while time.monotonic() < self._blackhole_until:
            await asyncio.sleep(0.02)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
