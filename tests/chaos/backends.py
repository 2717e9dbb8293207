"""Every backend the chaos runner knows, in one list: a new backend is one entry.

An entry says how to start a store of its own in a directory (a `Service`), and which
fault kinds apply to it. `crash` names what the "restart" fault does on it: `server`
kills the server (SIGKILL, or SIGTERM where the settings only promise durability on a
clean shutdown) and starts it again from its data; `writer` (SQLite, no server) SIGKILLs
a worker caught holding the database's write lock, mid-transaction.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tasuki.testing.servers import (
    DUMMY_AWS_ENV,
    MotoServer,
    PostgresServer,
    RedisCluster,
    RedisServer,
)

KINDS = ("kill", "stop", "restart", "net")


class Service(Protocol):
    url: str  # how the runner's producer and checker reach the store directly
    port: int | None  # the TCP port a proxy may stand in front of (None: not networked)
    path: Path | None  # the database file, for a store without a server

    def worker_url(self, port: int | None) -> str:
        """The URL workers use: through the proxy on `port` when one is given."""
        ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...


class SQLiteService:
    def __init__(self, workdir: Path) -> None:
        self.url = f"sqlite:///{workdir / 'chaos.db'}"
        self.port: int | None = None
        self.path: Path | None = workdir / "chaos.db"

    def worker_url(self, port: int | None) -> str:
        return self.url

    def restart(self) -> None:
        raise NotImplementedError("SQLite has no server: its crash is a writer's death")

    def stop(self) -> None:
        pass


class RedisService:
    def __init__(self, workdir: Path, appendfsync: str, crash_signal: signal.Signals) -> None:
        self.server = RedisServer(workdir / "redis", appendonly=True, appendfsync=appendfsync)
        self.server.start()
        self.port: int | None = self.server.port
        self.path: Path | None = None
        self.prefix = f"chaos-{uuid.uuid4().hex[:8]}:"
        self.url = self.worker_url(None)
        self.crash_signal = crash_signal

    def worker_url(self, port: int | None) -> str:
        # A short socket timeout: a blackholed call gives up well within one lease.
        return f"redis://127.0.0.1:{port or self.port}/0?prefix={self.prefix}&socket_timeout=1"

    def restart(self) -> None:
        if self.crash_signal == signal.SIGKILL:
            self.server.kill()
        else:
            self.server.stop()
        self.server.start()

    def stop(self) -> None:
        self.server.stop()


class ClusterService:
    """Three masters; the client follows the cluster's own addresses, so no proxy."""

    def __init__(self, workdir: Path) -> None:
        self.port: int | None = None
        self.path: Path | None = None
        self.cluster = RedisCluster(workdir / "cluster").__enter__()
        self.url = f"{self.cluster.url()}?prefix=chaos-{uuid.uuid4().hex[:8]}:&socket_timeout=1"

    def worker_url(self, port: int | None) -> str:
        return self.url

    def restart(self) -> None:
        raise NotImplementedError("the test cluster runs without persistence")

    def stop(self) -> None:
        self.cluster.stop()


class PostgresService:
    """A cluster of our own (the restart fault stops it as a crash would)."""

    def __init__(self, workdir: Path) -> None:
        self.server = PostgresServer(workdir / "postgres", own=True).start()
        self.port: int | None = self.server.port
        self.path: Path | None = None
        self.schema = f"chaos_{uuid.uuid4().hex[:8]}"
        self.url = self.server.url(self.schema)

    def worker_url(self, port: int | None) -> str:
        base = self.url if port is None else self.url.replace(f":{self.port}/", f":{port}/")
        return f"{base}&connect_timeout=2"

    def restart(self) -> None:
        self.server.restart()

    def stop(self) -> None:
        self.server.stop()


class SqsService:
    """The local SQS server; it keeps its queues in memory, so no restart fault."""

    def __init__(self, workdir: Path) -> None:
        os.environ.update(DUMMY_AWS_ENV)  # the workers inherit the runner's environment
        self.server = MotoServer().start()
        self.port: int | None = self.server.port
        self.path: Path | None = None
        self.prefix = f"chaos{uuid.uuid4().hex[:8]}-"
        self.locks = workdir / "sqs-locks.db"
        self.url = self.worker_url(None)

    def worker_url(self, port: int | None) -> str:
        endpoint = f"http://127.0.0.1:{port or self.port}"
        return (
            f"sqs://us-east-1?endpoint_url={endpoint}&prefix={self.prefix}"
            f"&locks=sqlite:///{self.locks}"
        )

    def restart(self) -> None:
        raise NotImplementedError("the local SQS server keeps its queues in memory")

    def stop(self) -> None:
        self.server.stop()


@dataclass(frozen=True)
class ChaosBackend:
    name: str
    start: Callable[[Path], Service]
    faults: frozenset[str]
    crash: str  # "server" | "writer"
    # False: a demonstration of settings that are known to lose data, run only by name
    # (`./dev chaos redis-everysec-kill9`), never by default nor by the test suite.
    default: bool = True


BACKENDS: list[ChaosBackend] = [
    ChaosBackend("sqlite", SQLiteService, frozenset({"kill", "stop", "restart"}), "writer"),
    ChaosBackend(
        "redis",
        lambda d: RedisService(d, "always", signal.SIGKILL),
        frozenset(KINDS),
        "server",
    ),
    ChaosBackend(
        "redis-everysec",
        lambda d: RedisService(d, "everysec", signal.SIGTERM),
        frozenset(KINDS),
        "server",
    ),
    ChaosBackend("redis-cluster", ClusterService, frozenset({"kill", "stop"}), "server"),
    ChaosBackend("postgresql", PostgresService, frozenset(KINDS), "server"),
    ChaosBackend("sqs", SqsService, frozenset({"kill", "stop", "net"}), "server"),
    ChaosBackend(
        "redis-everysec-kill9",
        lambda d: RedisService(d, "everysec", signal.SIGKILL),
        frozenset(KINDS),
        "server",
        default=False,
    ),
]
BY_NAME = {b.name: b for b in BACKENDS}
