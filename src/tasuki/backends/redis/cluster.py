"""Redis Cluster through redis-py: the only module of tasuki that imports `redis`.

A Cluster client must learn the slot map, route each call to the master that owns its
keys, follow MOVED and ASK during a resharding and find the new master after a failover.
redis-py's `RedisCluster` does all of that well, so on a Cluster every call goes through
it unchanged. `connection.py` imports this module only once the server has said it is a
Cluster node (or the URL said `cluster=yes`), so a single server never loads redis-py.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import RedisCluster
from redis.commands.core import Script as RegisteredScript
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    ClusterError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)
from redis.retry import Retry

from tasuki.backends.redis.scripts import Script

# What redis-py raises: its RedisError tree, and the cluster client's own exceptions
# (slots not covered during a failover, no node reachable), which are not RedisErrors.
ERRORS = (RedisError, RedisClusterException)


def kind(exc: BaseException) -> str | None:
    """What went wrong, in the words of `errors.translate`; None for anything else."""
    if isinstance(exc, AuthenticationError | AuthorizationError):
        return "credentials"
    if isinstance(exc, BusyLoadingError):
        return "loading"
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return "unreachable"
    if isinstance(exc, ClusterError | TryAgainError | RedisClusterException):
        return "cluster"
    return None


class ClusterClient:
    """A `RedisCluster` for one URL, with the scripts registered on first use.

    redis-py retries a command twice on a connection error (a pooled socket that the
    server closed during a restart), never on a timeout, as the single-server path does.
    """

    def __init__(self, connection: dict[str, Any], socket_timeout: float) -> None:
        kwargs = {k: v for k, v in connection.items() if v is not None and k != "db"}
        retry = Retry(
            ExponentialWithJitterBackoff(base=0.01, cap=0.1),
            retries=2,
            supported_errors=(redis.ConnectionError,),
        )
        self.client: Any = RedisCluster(
            **kwargs,
            protocol=2,
            socket_timeout=socket_timeout,
            socket_connect_timeout=min(socket_timeout, 5.0),
            socket_keepalive=True,
            retry=retry,
        )
        self._scripts: dict[str, RegisteredScript] = {}

    def run(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        """EVALSHA on the master of the keys' slot; NOSCRIPT loads the script there."""
        registered = self._scripts.get(script.name)
        if registered is None:
            registered = self._scripts[script.name] = self.client.register_script(script.source)
        return registered(keys, args)

    def command(self, args: tuple[Any, ...]) -> Any:
        return self.client.execute_command(*args)

    def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """The commands grouped by node, one round trip per node; errors raised."""
        pipe = self.client.pipeline(transaction=False)
        for args in commands:
            pipe.execute_command(*args)
        replies: list[Any] = pipe.execute()
        return replies

    def close(self) -> None:
        self.client.close()
