"""A minimal RESP2 client: one socket to one Redis server, replies parsed by hiredis.

The backend needs five things from Redis on a single server: EVALSHA, SCRIPT LOAD, a
handful of plain commands, BLPOP and a short pipeline. redis-py does all of that and far
more, and pays for it twice: `import redis` loads its asyncio client, observability and
metadata modules (tens of milliseconds of every worker's start-up), and each command
crosses its pool, retry, health-check and callback layers (about 15 µs of a local round
trip). This module is the part we use and nothing else: `hiredis.pack_command` builds the
request, one `sendall` sends it, `recv_into` one reusable buffer and `hiredis.Reader`
parse the reply. redis-py stays for Redis Cluster, whose routing is its real value.

A `Client` is not thread-safe; a pool hands each one to one thread at a time. Errors:

- an error reply (`-ERR ...`) is a `ReplyError` carrying Redis's code (`NOSCRIPT`,
  `WRONGTYPE`, `LOADING`, `NOAUTH`, `WRONGPASS`, `NOPERM`...). The whole reply was read,
  so the socket is in step with the server and stays usable;
- anything else (refused, reset, closed, garbled, interrupted) is `ConnectionFailed`,
  or `TimedOut` when the server did not answer in time. Part of a reply may be unread,
  so the client closes its socket: it is never reused.

Only RESP2 is spoken, so there are no push messages and no RESP3 types: a reply is
bytes, int, None, a list of those, or an error.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import hiredis

if TYPE_CHECKING:
    import ssl

# One receive buffer per socket: a lease of 100 small messages is ~10 KB of reply.
BUFFER_SIZE = 65536
# Connecting never waits longer than this, even with a long socket_timeout.
MAX_CONNECT_TIMEOUT = 5.0

# One command (bytes, str, int or float arguments) as RESP bytes; hiredis's stub types
# the argument as a one-element tuple, so it is re-typed here once.
pack_command: Callable[[tuple[Any, ...]], bytes] = hiredis.pack_command


class RespError(Exception):
    """Anything this client raises."""


class ReplyError(RespError):
    """The server answered with an error; the socket is still good.

    `code` is the error's first word, e.g. `WRONGTYPE`; hiredis builds these from the
    reply text, so a constructor with one argument is part of the contract.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = message.split(" ", 1)[0]


class AuthError(ReplyError):
    """The server refused AUTH while connecting (wrong password, unknown user)."""


class ConnectionFailed(RespError):
    """The socket could not be opened or broke mid-call; it has been closed."""


class TimedOut(RespError):
    """No connection or no reply in time. A command sent may have run, or may still."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a server is and how to log in; `connect` opens a `Client` to it."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None  # a unix socket instead of host:port
    username: str | None = None
    password: str | None = None
    db: int = 0
    timeout: float = 10.0  # of every send and receive, and of BLPOP's whole wait
    tls: ssl.SSLContext | None = None

    @property
    def where(self) -> str:
        return self.path if self.path is not None else f"{self.host}:{self.port}"


def tls_context(cert_reqs: str = "required", ca_certs: str | None = None) -> ssl.SSLContext:
    """A TLS context for `rediss://`, as redis-py builds one from the same options.

    `required` verifies the certificate and the host name, `optional` verifies a
    certificate only against the CAs and `none` trusts anything. `ssl` is imported here
    so that plain `redis://` never loads it.
    """
    import ssl

    try:
        context = ssl.create_default_context(cafile=ca_certs)
    except OSError as exc:
        raise ConnectionFailed(f"cannot load ssl_ca_certs {ca_certs!r}: {exc}") from exc
    if cert_reqs != "required":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_OPTIONAL if cert_reqs == "optional" else ssl.CERT_NONE
    return context


def connect(endpoint: Endpoint) -> Client:
    """Open a socket, authenticate and select the database, in one round trip."""
    connect_timeout = min(endpoint.timeout, MAX_CONNECT_TIMEOUT)
    sock: socket.socket | None = None
    try:
        if endpoint.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(connect_timeout)
            sock.connect(endpoint.path)
        else:
            sock = socket.create_connection((endpoint.host, endpoint.port), connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if endpoint.tls is not None:
                sock = endpoint.tls.wrap_socket(sock, server_hostname=endpoint.host)
        sock.settimeout(endpoint.timeout)
    except TimeoutError as exc:
        if sock is not None:
            sock.close()
        raise TimedOut(f"no connection within {connect_timeout:g} s") from exc
    except OSError as exc:
        if sock is not None:
            sock.close()
        raise ConnectionFailed(f"cannot connect: {exc}") from exc
    client = Client(sock)
    try:
        _log_in(client, endpoint)
    except BaseException:
        client.close()
        raise
    return client


def _log_in(client: Client, endpoint: Endpoint) -> None:
    commands: list[tuple[Any, ...]] = []
    if endpoint.password is not None:
        if endpoint.username is not None:
            commands.append((b"AUTH", endpoint.username, endpoint.password))
        else:
            commands.append((b"AUTH", endpoint.password))
    if endpoint.db:
        commands.append((b"SELECT", endpoint.db))
    if not commands:
        return
    replies = client.execute_many(b"".join(map(pack_command, commands)), len(commands))
    for command, reply in zip(commands, replies, strict=True):
        if isinstance(reply, ReplyError):
            if command[0] == b"AUTH":
                raise AuthError(str(reply))
            raise reply


class Client:
    """One connection: a socket, its reply reader and its receive buffer.

    After any failure other than an error reply the client is closed (`closed` is
    true) and every later call fails; its owner drops it and connects anew.
    """

    __slots__ = ("_buffer", "_reader", "_recv_into", "_sendall", "_sock", "closed")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._sendall = sock.sendall
        self._recv_into = sock.recv_into
        self._reader = hiredis.Reader(replyError=ReplyError)
        self._buffer = bytearray(BUFFER_SIZE)
        self.closed = False

    def execute(self, packed: bytes) -> Any:
        """Send one packed command (`hiredis.pack_command`) and return its reply.

        An error reply is raised as `ReplyError`. A blocking command (BLPOP) must block
        for less than the socket timeout, or the wait ends in `TimedOut`.
        """
        self.send(packed)
        return self.receive()

    def send(self, packed: bytes) -> None:
        """The first half of `execute`: the caller may work while the server does, then
        call `receive` (exactly once) before anything else is sent on this client."""
        try:
            self._sendall(packed)
        except BaseException as exc:
            failure = self._broken(exc)
            if failure is exc:
                raise
            raise failure from exc

    def receive(self) -> Any:
        """The reply to the command `send` sent; an error reply is raised as `ReplyError`."""
        reply = self._next_reply()
        if type(reply) is ReplyError:
            raise reply
        return reply

    def execute_many(self, packed: bytes, count: int) -> list[Any]:
        """Send `count` packed commands at once (a pipeline) and return their replies.

        All replies are read before returning, so the socket stays in step; an error
        reply stands in its place in the list as a `ReplyError`, for the caller to
        judge. (A command after a failed one still ran: this is no transaction.)
        """
        self.send(packed)
        return [self._next_reply() for _ in range(count)]

    def _next_reply(self) -> Any:
        reader = self._reader
        buffer = self._buffer
        try:
            reply: Any = reader.gets()
            while reply is False:
                n = self._recv_into(buffer)
                if not n:
                    raise ConnectionFailed("connection closed by the server")
                reader.feed(buffer, 0, n)  # type: ignore[arg-type]  # any buffer will do
                reply = reader.gets()
        except BaseException as exc:
            failure = self._broken(exc)
            if failure is exc:
                raise
            raise failure from exc
        return reply

    def _broken(self, exc: BaseException) -> BaseException:
        """Close the socket after a failure mid-call; what to raise in its place."""
        self.close()
        if isinstance(exc, TimeoutError):
            return TimedOut(f"no reply within {self._sock.gettimeout():g} s")
        if isinstance(exc, OSError):
            return ConnectionFailed(f"connection lost: {exc}")
        if isinstance(exc, hiredis.ProtocolError):
            return ConnectionFailed(f"not a Redis reply: {exc}")
        return exc  # ConnectionFailed itself, or an interrupt: raised unchanged

    def close(self) -> None:
        self.closed = True
        self._sock.close()
