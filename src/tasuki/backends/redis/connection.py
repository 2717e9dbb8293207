"""From a URL to a connected client: parsing, one client per server per process, errors.

Every `RedisBackend` of a process that points at the same server shares one client, so
one connection pool. Connecting is lazy (the first operation connects), so an app or a
worker can start while Redis is down or restarting: the operation fails with
`BackendUnavailable`, which the worker runtime retries. After `fork()` the child opens
its own client; sockets are never shared across processes.

redis-py retries a command twice on a connection error (a pooled socket that the
server closed during a restart), never on a timeout: a timed-out script may have run.
Every script is safe to run twice anyway: enqueue is idempotent, a repeated lease
only leases more, and a repeated settle answers "stale" for what was already settled.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import hiredis
import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import RedisCluster
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    ClusterError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.retry import Retry

from tasuki import logs
from tasuki.backends.redis.keys import DEFAULT_PREFIX
from tasuki.backends.redis.scripts import Scripts
from tasuki.backends.urls import query_options
from tasuki.errors import BackendError, BackendUnavailable, InvalidURL

DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024
DEFAULT_SOCKET_TIMEOUT = 10.0
CLUSTER_MODES = ("auto", "yes", "no")
MIN_VERSION = (6, 2)
# A script call that failed on a broken socket is sent again on a fresh one this often.
SCRIPT_RETRIES = 2


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError("must be > 0")
    return value


def _cluster_mode(raw: str) -> str:
    if raw not in CLUSTER_MODES:
        raise ValueError(f"must be one of {', '.join(CLUSTER_MODES)}")
    return raw


def _cert_reqs(raw: str) -> str:
    if raw not in ("none", "optional", "required"):
        raise ValueError("must be none, optional or required")
    return raw


_COMMON_OPTIONS: dict[str, Any] = {
    "prefix": str,
    "max_message_size": _positive_int,
    "cluster": _cluster_mode,
    "socket_timeout": _positive_float,
}
_TLS_OPTIONS: dict[str, Any] = {"ssl_cert_reqs": _cert_reqs, "ssl_ca_certs": str}
_UNIX_OPTIONS: dict[str, Any] = {"db": int}


@dataclass(frozen=True)
class RedisOptions:
    """A parsed backend URL."""

    url: str  # the URL for display: password masked
    where: str  # host:port or the socket path, for error messages
    prefix: str
    max_message_size: int
    cluster: str
    socket_timeout: float
    connection: dict[str, Any] = field(hash=False)  # keyword arguments of redis.Redis

    @property
    def identity(self) -> tuple[object, ...]:
        """What makes two URLs share a client: everything but the key prefix and limits."""
        return (self.cluster, self.socket_timeout, *sorted(self.connection.items()))


def parse_url(url: str) -> RedisOptions:
    """`redis://[user:pass@]host[:port][/db]`, `rediss://...`, `unix://[user:pass@]/path`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    allowed = dict(_COMMON_OPTIONS)
    if scheme == "rediss":
        allowed.update(_TLS_OPTIONS)
    if scheme == "unix":
        allowed.update(_UNIX_OPTIONS)
    options = query_options(url, allowed)
    try:
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"invalid redis URL {url!r}: {exc}") from exc
    conn: dict[str, Any] = {"username": username, "password": password}
    if scheme == "unix":
        if not parts.path:
            raise InvalidURL(
                f"unix:// URL {url!r} needs a socket path, e.g. unix:///run/redis.sock"
            )
        conn["unix_socket_path"] = parts.path
        conn["db"] = options.get("db", 0)
        where = parts.path
    else:
        host = parts.hostname or "localhost"
        port = port or 6379
        db_text = parts.path.strip("/") or "0"
        if not db_text.isdigit():
            raise InvalidURL(f"invalid redis database {db_text!r} in {url!r}: expected /0, /1...")
        conn.update(host=host, port=port, db=int(db_text))
        where = f"{host}:{port}"
        if scheme == "rediss":
            conn["ssl"] = True
            conn["ssl_cert_reqs"] = options.get("ssl_cert_reqs", "required")
            if "ssl_ca_certs" in options:
                conn["ssl_ca_certs"] = options["ssl_ca_certs"]
    cluster = str(options.get("cluster", "auto"))
    if cluster == "yes" and scheme == "unix":
        raise InvalidURL(f"Redis Cluster is reached over TCP, not a unix socket: {url!r}")
    if cluster == "yes" and conn["db"] != 0:
        raise InvalidURL(f"Redis Cluster has only database 0: {url!r}")
    prefix = str(options.get("prefix", DEFAULT_PREFIX))
    display = url
    if parts.password:
        display = url.replace(f":{parts.password}@", ":***@", 1)
    return RedisOptions(
        url=display,
        where=where,
        prefix=prefix,
        max_message_size=int(options.get("max_message_size", DEFAULT_MAX_MESSAGE_SIZE)),  # type: ignore[call-overload]
        cluster=cluster,
        socket_timeout=float(options.get("socket_timeout", DEFAULT_SOCKET_TIMEOUT)),  # type: ignore[arg-type]
        connection=conn,
    )


# What redis-py raises: its RedisError tree, and the cluster client's own exceptions
# (slots not covered during a failover, no node reachable), which are not RedisErrors.
REDIS_ERRORS = (RedisError, RedisClusterException)


def translate(exc: RedisError | RedisClusterException, where: str) -> BackendError:
    """A redis-py error as a tasuki error that names the server and what went wrong."""
    if isinstance(exc, AuthenticationError | AuthorizationError):
        return BackendUnavailable(f"Redis server at {where} refused the credentials: {exc}")
    if isinstance(exc, BusyLoadingError):
        return BackendUnavailable(f"Redis server at {where} is still loading its data: {exc}")
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return BackendUnavailable(f"Redis server at {where} is unreachable: {exc}")
    if isinstance(exc, ClusterError | TryAgainError | RedisClusterException):
        return BackendUnavailable(f"Redis Cluster at {where} is not available: {exc}")
    return BackendError(f"Redis at {where} failed: {type(exc).__name__}: {exc}")


class Connection:
    """The client of one server in this process, connected on first use.

    `granule` is how late Redis may wake a blocked BLPOP past its timeout: the server
    checks those timeouts once per event-loop tick, 1/hz seconds (100 ms by default).
    """

    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self.pid = os.getpid()
        self.refs = 0
        self.client: Any = None
        self.scripts: Scripts | None = None
        self.cluster = False
        self.granule = 0.1
        # (queues set key, queue) -> when this process last added the queue to the set
        self.announced: dict[tuple[str, str], float] = {}
        self._mutex = threading.Lock()
        # Sockets for direct script calls; list.pop/append are atomic, so no lock.
        self._idle: list[Any] = []

    def connect(self) -> Scripts:
        """Connect (once), find out whether the server is a Cluster node, load scripts."""
        with self._mutex:
            if self.scripts is not None:
                return self.scripts
            opts = self.options
            kwargs = {
                **{k: v for k, v in opts.connection.items() if v is not None},
                "protocol": 2,
                "socket_timeout": opts.socket_timeout,
                "socket_connect_timeout": min(opts.socket_timeout, 5.0),
                "socket_keepalive": True,
            }
            retry = Retry(
                ExponentialWithJitterBackoff(base=0.01, cap=0.1),
                retries=2,
                supported_errors=(redis.ConnectionError,),
            )
            plain = redis.Redis(**kwargs, retry=retry)
            try:
                try:
                    info: dict[str, Any] = plain.info()
                except ResponseError:
                    info = {}  # INFO denied by an ACL: no detection (use cluster=yes|no), hz 10
                cluster = opts.cluster == "yes" or (
                    opts.cluster == "auto" and bool(info.get("cluster_enabled"))
                )
                self._check(info)
                if cluster:
                    plain.close()
                    kwargs.pop("db", None)
                    client: Any = RedisCluster(retry=retry, **kwargs)
                else:
                    client = plain
            except REDIS_ERRORS as exc:
                plain.close()
                raise translate(exc, opts.where) from exc
            except BaseException:
                plain.close()
                raise
            self.granule = 1.0 / max(1, int(info.get("hz", 10)))
            self.cluster = cluster
            self.client = client
            self.scripts = Scripts(client)
            return self.scripts

    def run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Call script `name` by SHA: the hot path of every backend operation.

        On a single server the call goes straight to a pooled socket of redis-py: the
        packed EVALSHA, one read, NOSCRIPT answered by loading the script and calling
        again. That skips redis-py's per-command layers (pool locking, retry wrapper,
        observability hooks, response callbacks), about 15 µs of every round trip,
        which is a fifth of a local enqueue. A Cluster client routes by key slot, so
        Cluster calls go through redis-py as they are.
        """
        scripts = self.scripts if self.scripts is not None else self.connect()
        script = getattr(scripts, name)
        if self.cluster:
            return script(keys, args)
        packed = hiredis.pack_command((b"EVALSHA", script.sha, len(keys), *keys, *args))
        idle = self._idle
        for attempt in range(SCRIPT_RETRIES + 1):
            try:
                sock = idle.pop()
            except IndexError:
                sock = self.client.connection_pool.make_connection()
            try:
                sock.send_packed_command((packed,), check_health=False)
                try:
                    reply = sock.read_response()
                except NoScriptError:
                    sock.send_command("SCRIPT", "LOAD", script.script, check_health=False)
                    sock.read_response()
                    sock.send_packed_command((packed,), check_health=False)
                    reply = sock.read_response()
            except ResponseError:
                idle.append(sock)  # a whole error reply: the socket is fine
                raise
            except redis.ConnectionError:
                sock.disconnect()
                idle.append(sock)
                if attempt == SCRIPT_RETRIES:
                    raise
                time.sleep(0.01 * (attempt + 1))
                continue
            except BaseException:
                sock.disconnect()  # the reply may be half read: never reuse the socket
                idle.append(sock)
                raise
            idle.append(sock)
            return reply
        raise AssertionError("unreachable")

    def _check(self, info: dict[str, Any]) -> None:
        version = str(info.get("redis_version", ""))
        numbers = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
        if version and numbers < MIN_VERSION:
            raise BackendError(
                f"Redis at {self.options.where} is version {version}; tasuki needs >= 6.2"
            )
        policy = info.get("maxmemory_policy")
        if policy not in (None, "noeviction"):
            logs.logger.warning(
                "Redis at %s has maxmemory-policy %s: under memory pressure it may evict "
                "queued messages; a queue needs noeviction",
                self.options.where,
                policy,
            )

    def close(self) -> None:
        with self._mutex:
            client, self.client, self.scripts = self.client, None, None
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.disconnect()
        if client is not None:
            client.close()


_shared: dict[tuple[object, ...], Connection] = {}
_shared_mutex = threading.Lock()


def acquire(options: RedisOptions) -> Connection:
    """The process's client for these options (one pool per server per process)."""
    with _shared_mutex:
        conn = _shared.get(options.identity)
        if conn is None or conn.pid != os.getpid():
            conn = _shared[options.identity] = Connection(options)
        conn.refs += 1
        return conn


def release(conn: Connection) -> None:
    """Drop one user of `conn`; the last one closes it."""
    with _shared_mutex:
        conn.refs -= 1
        if conn.refs > 0:
            return
        if _shared.get(conn.options.identity) is conn:
            del _shared[conn.options.identity]
    if conn.pid == os.getpid():
        conn.close()
