"""What every part of the Redis backend stands on: `Plumbing`, one per backend, holding
the connection and the key space; it calls the scripts and plain commands, groups a
batch by queue and waits on a notify list. The parts (leasing.py, settling.py, flows.py,
producing.py, cancelling.py, results.py, operating.py, locks.py) are handed it;
`RedisBackend` (backend.py) joins them."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tasuki.backends.base import Receipt
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


class Plumbing:
    """The connection of one backend (a forked child's its own) and its key space."""

    def __init__(self, options: RedisOptions) -> None:
        self.url = options.url
        self.options = options
        self.keys = KeySpace(options.prefix)
        self.max_block = max(0.05, options.socket_timeout / 2)
        self._conn = connection.acquire(options)
        self._closed = False

    def connection(self) -> Connection:
        """This process's connection, connected; a forked child gets its own."""
        if self._closed:
            raise BackendError(f"the Redis backend {self.url} is closed")
        conn = self._conn
        if conn.pid != os.getpid():
            conn = self._conn = connection.acquire(self.options)
        if conn.scripts is None:
            conn.connect()
        return conn

    @property
    def granule(self) -> float:
        """How late Redis may wake a blocked BLPOP past its timeout (`Connection.granule`)."""
        return self._conn.granule

    def eval(self, name: str | Script, keys: list[str], args: list[Any]) -> Any:
        """The script `lua/<name>.lua` (or a `Script` of another package's) on `keys` and
        `args`."""
        return self.connection().run(name, keys, args)

    def command(self, *args: Any) -> Any:
        """A plain command (not a script), on a single server or a Cluster alike."""
        return self.connection().command(*args)

    def per_queue(
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

    def wait_on(self, notify: str, remaining: float) -> None:
        """Wait up to `remaining` seconds (at most `max_block`) for a push to the notify
        list `notify`: one BLMOVE of the list onto itself, so every waiter wakes and the
        token stays for the next one."""
        block = min(remaining, self.max_block)
        if block < MIN_BLOCK:
            time.sleep(block)
        else:
            self.command("BLMOVE", notify, notify, "RIGHT", "LEFT", block)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._conn.pid == os.getpid():
            connection.release(self._conn)
