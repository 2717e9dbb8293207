"""A counting proxy for the PostgreSQL wire protocol: what a worker asks of the server.

`Proxy(upstream_port)` listens on a free port of 127.0.0.1 (in a thread of its own, on
an asyncio loop) and passes every connection through to the server unchanged, counting
the client's messages by type (`Q` a simple query, `P` parse, `B` bind, `E` execute,
`S` sync, ...) and the server's `Z` (ReadyForQuery: one per query or sync, that is one
per request the client waits on, pipelined or not), and the bytes each way. It answers
an SSL or GSS encryption request itself with "no", so the stream stays readable: the
server sees a plain startup. `ports()` are the proxy's own ends of its server
connections, the `client_port` of their backends in `pg_stat_activity`.

Used by `benchmarks.shape_pg_profile`; counts are load-independent, the rates under the
proxy are not what is measured.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections import Counter
from typing import Any

SSL_REQUEST = 80877103
GSS_REQUEST = 80877104
CANCEL_REQUEST = 80877102


class Stream:
    """Splits one direction of a connection into messages and counts their types."""

    def __init__(self, counts: Counter[str], prefix: str, typed: bool) -> None:
        self.counts, self.prefix, self.typed = counts, prefix, typed
        self.head = b""
        self.skip = 0
        #: the untyped messages seen (startup, SSL/GSS requests), by their code
        self.untyped: list[int] = []

    def feed(self, data: bytes) -> list[int]:
        """Count the messages in `data`; returns the codes of untyped ones completed."""
        done: list[int] = []
        i, n = 0, len(data)
        while i < n:
            if self.skip:
                take = min(self.skip, n - i)
                self.skip -= take
                i += take
                continue
            need = 5 if self.typed else 8
            take = min(need - len(self.head), n - i)
            self.head += data[i : i + take]
            i += take
            if len(self.head) < need:
                break
            if self.typed:
                kind, length = chr(self.head[0]), struct.unpack("!I", self.head[1:5])[0]
                self.counts[self.prefix + kind] += 1
                self.skip = length - 4
            else:
                length, code = struct.unpack("!II", self.head)
                done.append(code)
                self.skip = length - 8
                if code not in (SSL_REQUEST, GSS_REQUEST):
                    self.typed = True
            self.head = b""
        return done


class Proxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.counts: Counter[str] = Counter()
        self.bytes = Counter[str]()
        self.connections = 0
        self._ports: list[int] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0
        self._thread = threading.Thread(target=self._run, name="pg-wire-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> Any:
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            return server

        self._server = self._loop.run_until_complete(start())
        self._loop.run_forever()

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            out = dict(self.counts)
            out.update({f"bytes_{k}": v for k, v in self.bytes.items()})
            out["connections"] = self.connections
        return out

    def ports(self) -> list[int]:
        with self._lock:
            return list(self._ports)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = Stream(self.counts, "c", typed=False)
        server = Stream(self.counts, "s", typed=True)
        # The startup: answer encryption requests with "no" until a startup or cancel.
        while True:
            data = await reader.read(65536)
            if not data:
                writer.close()
                return
            with self._lock:
                codes = client.feed(data)
            if codes and codes[-1] in (SSL_REQUEST, GSS_REQUEST) and not client.typed:
                writer.write(b"N")
                await writer.drain()
                continue
            break
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        with self._lock:
            self.connections += 1
            self._ports.append(up_writer.get_extra_info("sockname")[1])
        up_writer.write(data)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, st: Stream,
                       side: str) -> None:  # fmt: skip
            try:
                while data := await src.read(65536):
                    with self._lock:
                        st.feed(data)
                        self.bytes[side] += len(data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(
            pump(reader, up_writer, client, "sent"), pump(up_reader, writer, server, "received")
        )
