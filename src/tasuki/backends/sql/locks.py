"""The SQL backends' lock store: rows with an owner and an expiry, in the same database as
the messages, so an enqueue can take a unique claim in its own transaction."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from tasuki.backends.base import LockHolder, LockStore
from tasuki.backends.sql.dialect import Dialect, QueryName, named_rows


class SQLLockStore(LockStore):
    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self.clock: Callable[[], float] = time.time  # tests drive time by hand

    def _one(self, query: QueryName, params: dict[str, Any]) -> int:
        with self._dialect.write() as conn:
            params["now"] = self.clock()
            return int(conn.execute(self._dialect.queries[query], params).rowcount)

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        return self._one("lock_acquire", {"key": key, "owner": owner, "ttl": ttl}) == 1

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        dialect = self._dialect
        with dialect.write() as conn:
            now = self.clock()
            params = [{"key": k, "owner": owner, "ttl": ttl, "now": now} for k in keys]
            runs = dialect.many(conn, dialect.queries["lock_renew"], params)
            return [count == 1 for count, _ in runs]

    def release(self, key: str, owner: str) -> bool:
        return self._one("lock_release", {"key": key, "owner": owner}) == 1

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        params = {"key": key, "owner": owner, "new_owner": new_owner, "ttl": ttl}
        return self._one("lock_swap", params) == 1

    def holder(self, key: str) -> LockHolder | None:
        now = self.clock()
        with self._dialect.read() as conn:
            cursor = conn.execute(self._dialect.queries["lock_holder"], {"key": key, "now": now})
            rows = named_rows(cursor, "owner", "expires_at")
        for owner, expires_at in rows:  # one at most: the key is the primary key
            return LockHolder(owner, expires_at - now)
        return None
