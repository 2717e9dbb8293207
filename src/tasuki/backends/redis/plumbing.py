"""What the parts of the Redis backend stand on: the connection, script calls, the
grouping of a batch by queue, and the wait on a notify list. `RedisBackend` (backend.py)
is this plus its parts: producing.py, workflows.py, operating.py and its own lease,
settle and results."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tasuki.backends.base import Backend, Capabilities, Receipt
from tasuki.backends.redis import connection
from tasuki.backends.redis.connection import Connection
from tasuki.backends.redis.keys import KeySpace, QueueKeys
from tasuki.backends.redis.options import RedisOptions
from tasuki.backends.redis.scripts import Script
from tasuki.errors import BackendError

T = TypeVar("T")

# Messages (or receipts) per script call: bounds how long one call holds Redis.
CHUNK = 1000
# A blocked wait never sleeps less than this in Redis (BLPOP, BLMOVE); shorter pauses
# sleep locally.
MIN_BLOCK = 0.01


class RedisBase(Backend):
    """The state and plumbing the parts share (never used alone)."""

    def __init__(self, options: RedisOptions) -> None:
        self.url = options.url
        self.capabilities = Capabilities(
            max_message_size=options.max_message_size,
            results=True,
            priorities=True,
            cancel=True,
            progress=True,
            rate_limits=True,
            concurrency_limits=True,
            workflows=True,
        )
        self.keys = KeySpace(options.prefix)
        self._options = options
        self._conn = connection.acquire(options)
        self._closed = False
        self._max_block = max(0.05, options.socket_timeout / 2)

    def _connection(self) -> Connection:
        """This process's connection, connected; a forked child gets its own."""
        if self._closed:
            raise BackendError(f"the Redis backend {self.url} is closed")
        conn = self._conn
        if conn.pid != os.getpid():
            conn = self._conn = connection.acquire(self._options)
        if conn.scripts is None:
            conn.connect()
        return conn

    def _eval(self, name: str | Script, keys: list[str], args: list[Any]) -> Any:
        return self._connection().run(name, keys, args)

    def _command(self, *args: Any) -> Any:
        """A plain command (not a script), on a single server or a Cluster alike."""
        return self._connection().command(*args)

    def _per_queue(
        self,
        items: Sequence[T],
        receipt: Callable[[T], Receipt],
        call: Callable[[QueueKeys, Sequence[T]], list[int]],
    ) -> list[bool]:
        """Run `call` once per queue (and per CHUNK items), answers back in input order."""
        if not items:
            return []
        first = receipt(items[0]).queue
        if all(receipt(item).queue == first for item in items):
            keys = self.keys.queue(first)
            results: list[bool] = []
            for start in range(0, len(items), CHUNK):
                results.extend(r == 1 for r in call(keys, items[start : start + CHUNK]))
            return results
        groups: dict[str, list[int]] = {}
        for n, item in enumerate(items):
            groups.setdefault(receipt(item).queue, []).append(n)
        out = [False] * len(items)
        for queue, indices in groups.items():
            keys = self.keys.queue(queue)
            for start in range(0, len(indices), CHUNK):
                part = indices[start : start + CHUNK]
                for n, r in zip(part, call(keys, [items[n] for n in part]), strict=True):
                    out[n] = r == 1
        return out

    def _wait_on(self, notify: str, remaining: float) -> None:
        """Wait up to `remaining` seconds (at most `_max_block`) for a push to the notify
        list `notify`: one BLMOVE of the list onto itself, so every waiter wakes and the
        token stays for the next one."""
        block = min(remaining, self._max_block)
        if block < MIN_BLOCK:
            time.sleep(block)
        else:
            self._command("BLMOVE", notify, notify, "RIGHT", "LEFT", block)

    def ping(self) -> None:
        self._command("PING")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._conn.pid == os.getpid():
            connection.release(self._conn)
