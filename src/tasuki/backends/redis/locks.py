"""The lock store of the Redis backend: `<prefix>lock:<key>` strings changed by Lua."""

from __future__ import annotations

from collections.abc import Sequence

from tasuki.backends.redis.codec import ms
from tasuki.backends.redis.plumbing import Plumbing
from tasuki.backends.redis.slots import key_slot
from tasuki.core.locks import LockStore
from tasuki.core.records import FOREVER, LockHolder


class RedisLockStore(LockStore):
    """Locks as `<prefix>lock:<key>` strings (value = owner, PX = TTL), changed by Lua.

    A lapsed lock is an expired key, so Redis itself forgets it; every change compares
    the owner on the server in the same step.
    """

    def __init__(self, redis: Plumbing) -> None:
        self._redis = redis
        self._lock_key = redis.keys.lock

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        return bool(self._redis.eval("lock_acquire", [self._lock_key(key)], [owner, ms(ttl)]))

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        if not keys:
            return []
        full = [self._lock_key(k) for k in keys]
        redis = self._redis
        if not redis.connection().cluster:
            return [r == 1 for r in redis.eval("lock_renew", full, [owner, ms(ttl)])]
        by_slot: dict[int, list[int]] = {}
        for n, k in enumerate(full):
            by_slot.setdefault(key_slot(k.encode()), []).append(n)
        out = [False] * len(full)
        for indices in by_slot.values():
            reply = redis.eval("lock_renew", [full[n] for n in indices], [owner, ms(ttl)])
            for n, r in zip(indices, reply, strict=True):
                out[n] = r == 1
        return out

    def release(self, key: str, owner: str) -> bool:
        return bool(self._redis.eval("lock_release", [self._lock_key(key)], [owner]))

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        args = [owner, new_owner, ms(ttl)]
        return bool(self._redis.eval("lock_swap", [self._lock_key(key)], args))

    def holder(self, key: str) -> LockHolder | None:
        reply = self._redis.eval("lock_holder", [self._lock_key(key)], [])
        if not reply:
            return None
        owner, pttl = reply
        return LockHolder(owner.decode(), pttl / 1000 if pttl >= 0 else FOREVER)
