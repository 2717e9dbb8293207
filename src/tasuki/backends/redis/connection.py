"""From parsed options to a connected server: one pool per server per process, errors.

Every `RedisBackend` of a process that points at the same server shares one
`Connection`, so one pool of sockets. Connecting is lazy (the first operation
connects), so an app or a worker can start while Redis is down or restarting: the
operation fails with `BackendUnavailable`, which the worker runtime retries. After
`fork()` the child opens its own sockets; they are never shared across processes.

A single server is spoken to by `resp.Client` (our RESP2 client over hiredis), a Redis
Cluster by redis-py's cluster client (`cluster.py`), imported only when the server turns
out to be a Cluster node: a worker on a single server never imports redis-py.

A call that failed on a broken socket (a pooled socket that the server closed during a
restart, say) is sent again on a fresh one, twice at most; a timeout is never retried:
the script may have run, or may still be running. Every script is safe to run twice
anyway: enqueue is idempotent, a repeated lease only leases more, and a repeated settle
answers "stale" for what was already settled.

The URL itself is parsed in `options.py`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.backends.redis import resp
from tasuki.backends.redis.errors import translate
from tasuki.backends.redis.options import RedisOptions
from tasuki.backends.redis.resp import pack_command
from tasuki.backends.redis.scripts import SCRIPTS, Script, Scripts
from tasuki.errors import BackendError

if TYPE_CHECKING:
    from tasuki.backends.redis.cluster import ClusterClient

MIN_VERSION = (6, 2)
# A call that failed on a broken socket is sent again on a fresh one this often.
SCRIPT_RETRIES = 2


def _endpoint(options: RedisOptions) -> resp.Endpoint:
    conn = options.connection
    tls = None
    if conn.get("ssl"):
        tls = resp.tls_context(conn["ssl_cert_reqs"], conn.get("ssl_ca_certs"))
    return resp.Endpoint(
        host=conn.get("host", "localhost"),
        port=conn.get("port", 6379),
        path=conn.get("unix_socket_path"),
        username=conn["username"],
        password=conn["password"],
        db=conn["db"],
        timeout=options.socket_timeout,
        tls=tls,
    )


def _denied(exc: resp.ReplyError) -> bool:
    """INFO refused by an ACL, or renamed away: the backend works without it."""
    return exc.code == "NOPERM" or (exc.code == "ERR" and "unknown command" in str(exc))


def _parse_info(text: bytes) -> dict[str, str]:
    """INFO's `key:value` lines (section headers and blank lines skipped)."""
    info: dict[str, str] = {}
    for line in text.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and not key.startswith("#"):
            info[key] = value
    return info


class Connection:
    """The sockets of one server in this process, connected on first use.

    On a single server, a pool of idle `resp.Client`s: a call pops one (or connects a
    new one) and pushes it back once the reply is read; `list.pop` and `append` are
    atomic, so threads share the pool without a lock. A client that failed is not
    pushed back, so the pool only ever holds clients in step with the server.

    `granule` is how late Redis may wake a blocked BLPOP past its timeout: the server
    checks those timeouts once per event-loop tick, 1/hz seconds (100 ms by default).
    """

    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self.pid = os.getpid()
        self.refs = 0
        self.scripts: Scripts | None = None
        self.cluster = False
        self.granule = 0.1
        # (queues set key, queue) -> when this process last added the queue to the set
        self.announced: dict[tuple[str, str], float] = {}
        self._mutex = threading.Lock()
        self._where = options.where
        self._endpoint: resp.Endpoint | None = None
        self._idle: list[resp.Client] = []
        self._cluster: ClusterClient | None = None
        self._cluster_errors: tuple[type[Exception], ...] = ()
        # Scripts this process has loaded on the server (SCRIPT LOAD on first use).
        self._loaded: set[str] = set()

    def connect(self) -> Scripts:
        """Connect (once): check the server, find out whether it is a Cluster node."""
        with self._mutex:
            if self.scripts is not None:
                return self.scripts
            opts = self.options
            try:
                if self._endpoint is None:
                    self._endpoint = _endpoint(opts)
                try:
                    info = _parse_info(self._call(pack_command((b"INFO",))))
                except resp.ReplyError as exc:
                    if not _denied(exc):
                        raise
                    info = {}  # no detection (use cluster=yes|no), hz 10
            except resp.RespError as exc:
                raise translate(exc, self._where) from exc
            self._check(info)
            cluster = opts.cluster == "yes" or (
                opts.cluster == "auto" and info.get("cluster_enabled") == "1"
            )
            if cluster:
                self._open_cluster()
            self.granule = 1.0 / max(1, int(info.get("hz") or 10))
            self.cluster = cluster
            self.scripts = SCRIPTS
            return self.scripts

    def _open_cluster(self) -> None:
        from tasuki.backends.redis import cluster

        self._drop_idle()
        try:
            self._cluster = cluster.ClusterClient(
                self.options.connection, self.options.socket_timeout
            )
        except cluster.ERRORS as exc:
            raise translate(exc, self._where) from exc
        self._cluster_errors = cluster.ERRORS

    def run(self, name: str | Script, keys: list[str], args: list[Any]) -> Any:
        """Call script `name` by SHA: the hot path of every backend operation. `name` may
        be a `Script` of another package's (`scripts.load`).

        On a single server: the packed EVALSHA on a pooled socket, one read; NOSCRIPT
        is answered by SCRIPT LOAD and the EVALSHA again, both in one round trip.
        """
        scripts = self.scripts if self.scripts is not None else self.connect()
        script = getattr(scripts, name) if isinstance(name, str) else name
        if self._cluster is not None:
            try:
                return self._cluster.run(script, keys, args)
            except self._cluster_errors as exc:
                raise translate(exc, self._where) from exc
        packed = pack_command((b"EVALSHA", script.sha, len(keys), *keys, *args))
        try:
            self._load(script)
            try:
                return self._call(packed)
            except resp.ReplyError as exc:
                if exc.code != "NOSCRIPT":
                    raise
            load = pack_command((b"SCRIPT", b"LOAD", script.source))
            loaded, reply = self._call(load + packed, 2)
            for answer in (loaded, reply):
                if isinstance(answer, resp.ReplyError):
                    raise answer
            return reply
        except resp.RespError as exc:
            raise translate(exc, self._where) from exc

    def run_soon(self, name: str, keys: list[str], args: list[Any]) -> Callable[[], Any]:
        """Send script `name` now; the returned callable reads its reply (`Backend.lease_soon`).

        Only a single server is pipelined this way. On Cluster, or if the request cannot be
        sent, the callable makes an ordinary `run` instead. A reply lost with its socket is
        asked for again with `run`: like every script, the lease is safe to repeat (the
        messages of the lost reply stay leased until their visibility timeout).
        """
        scripts = self.scripts if self.scripts is not None else self.connect()
        if self._cluster is not None:
            return lambda: self.run(name, keys, args)
        script = getattr(scripts, name)
        packed = pack_command((b"EVALSHA", script.sha, len(keys), *keys, *args))
        idle = self._idle
        client = None
        try:
            self._load(script)
            client = self._checkout()
            client.send(packed)
        except resp.RespError:
            if client is not None and not client.closed:
                idle.append(client)
            return lambda: self.run(name, keys, args)
        sent = client

        def finish() -> Any:
            try:
                reply = sent.receive()
            except resp.ReplyError as exc:
                idle.append(sent)
                if exc.code == "NOSCRIPT":
                    return self.run(name, keys, args)  # loads it and calls again
                raise translate(exc, self._where) from exc
            except resp.ConnectionFailed:
                return self.run(name, keys, args)
            except resp.RespError as exc:
                raise translate(exc, self._where) from exc
            idle.append(sent)
            return reply

        return finish

    def run_each(self, name: str, calls: Iterable[tuple[list[str], list[Any]]]) -> Iterator[Any]:
        """Script `name` once per (keys, args) of `calls`, replies in order.

        Each call is sent before the reply to the one before is read, and `calls` is
        consumed lazily, so building the next call in Python overlaps Redis running the
        previous one: a large enqueue costs about the larger of the two, not their sum.
        One socket carries them all, so Redis runs them in order. After any failure the
        calls not yet answered are made again one by one with `run` (NOSCRIPT, a lost
        socket), which is safe because every script may run twice.
        """
        scripts = self.scripts if self.scripts is not None else self.connect()
        if self._cluster is not None:
            for keys, args in calls:
                yield self.run(name, keys, args)
            return
        script = getattr(scripts, name)
        unanswered: list[tuple[list[str], list[Any]]] = []
        client: resp.Client | None = None
        pending = iter(calls)
        try:
            self._load(script)
            client = self._checkout()
            for keys, args in pending:
                unanswered.append((keys, args))  # before sending: a failed send is made again
                client.send(pack_command((b"EVALSHA", script.sha, len(keys), *keys, *args)))
                if len(unanswered) == 2:
                    reply = client.receive()
                    unanswered.pop(0)
                    yield reply
            while unanswered:
                reply = client.receive()
                unanswered.pop(0)
                yield reply
        except resp.TimedOut as exc:
            raise translate(exc, self._where) from exc
        except resp.RespError:
            if client is not None:
                client.close()  # replies may be left unread: never reuse it
                client = None
            for keys, args in [*unanswered, *pending]:
                yield self.run(name, keys, args)
            unanswered.clear()
        finally:
            if client is not None:
                if unanswered or client.closed:
                    client.close()
                else:
                    self._idle.append(client)

    def _load(self, script: Script) -> None:
        """SCRIPT LOAD the first time this process calls `script`, so that its first
        EVALSHA is not a NOSCRIPT error (a failed call, counted as one by the server).
        After a restart or a SCRIPT FLUSH the server answers NOSCRIPT again, and `run`
        loads it then."""
        if script.name not in self._loaded:
            self._call(pack_command((b"SCRIPT", b"LOAD", script.source)))
            self._loaded.add(script.name)

    def command(self, *args: Any) -> Any:
        """A plain command (SADD, BLPOP, PING...), its errors translated."""
        if self.scripts is None:
            self.connect()
        try:
            if self._cluster is not None:
                return self._cluster.command(args)
            return self._call(pack_command(args))
        except resp.RespError as exc:
            raise translate(exc, self._where) from exc
        except self._cluster_errors as exc:
            raise translate(exc, self._where) from exc

    def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Several plain commands in one round trip (per node); the first error raised."""
        if self.scripts is None:
            self.connect()
        if not commands:
            return []
        try:
            if self._cluster is not None:
                return self._cluster.pipeline(commands)
            packed = b"".join(map(pack_command, commands))
            replies: list[Any] = self._call(packed, len(commands))
            for reply in replies:
                if isinstance(reply, resp.ReplyError):
                    raise reply
            return replies
        except resp.RespError as exc:
            raise translate(exc, self._where) from exc
        except self._cluster_errors as exc:
            raise translate(exc, self._where) from exc

    def _call(self, packed: bytes, count: int = 0) -> Any:
        """One packed command (`count` 0) or `count` of them, on a pooled socket.

        A call that failed because the socket broke is sent again on a fresh socket,
        SCRIPT_RETRIES times at most, after a short sleep: the first socket was likely
        one the server closed while idle. Error replies and timeouts are raised at once.
        """
        idle = self._idle
        attempt = 0
        fresh = False
        while True:
            client = None
            try:
                client = self._checkout(fresh)
                reply = client.execute_many(packed, count) if count else client.execute(packed)
            except resp.ReplyError:
                if client is not None and not client.closed:
                    idle.append(client)
                raise
            except resp.ConnectionFailed:
                if attempt == SCRIPT_RETRIES:
                    raise
                attempt += 1
                fresh = True
                time.sleep(0.01 * attempt)
                continue
            idle.append(client)
            return reply

    def _checkout(self, fresh: bool = False) -> resp.Client:
        """An idle pooled client, or a new connection (`fresh`, or none idle)."""
        if not fresh:
            try:
                return self._idle.pop()
            except IndexError:
                pass
        assert self._endpoint is not None
        return resp.connect(self._endpoint)

    def _check(self, info: dict[str, str]) -> None:
        version = info.get("redis_version", "")
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

    def _drop_idle(self) -> None:
        idle = self._idle
        while idle:
            try:
                client = idle.pop()
            except IndexError:  # another thread took the last one
                return
            client.close()

    def close(self) -> None:
        with self._mutex:
            cluster, self._cluster, self.scripts = self._cluster, None, None
            self._loaded.clear()
            self._drop_idle()
        if cluster is not None:
            cluster.close()


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
