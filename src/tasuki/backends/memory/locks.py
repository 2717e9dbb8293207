"""`memory://`'s lock store: locks with an owner and an expiry, under the backend's lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from tasuki.core.locks import LockStore
from tasuki.core.records import LockHolder


class MemoryLockStore(LockStore):
    def __init__(self, mutex: threading.RLock) -> None:
        self._mutex = mutex
        self.clock: Callable[[], float] = time.time  # tests drive time by hand
        self._locks: dict[str, tuple[str, float]] = {}

    def _live(self, key: str, now: float) -> tuple[str, float] | None:
        held = self._locks.get(key)
        if held is not None and held[1] <= now:
            del self._locks[key]
            return None
        return held

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        with self._mutex:
            now = self.clock()
            held = self._live(key, now)
            if held is not None and held[0] != owner:
                return False
            self._locks[key] = (owner, now + ttl)
            return True

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        with self._mutex:
            now = self.clock()
            results = []
            for key in keys:
                held = self._live(key, now)
                ok = held is not None and held[0] == owner
                if ok:
                    self._locks[key] = (owner, now + ttl)
                results.append(ok)
            return results

    def release(self, key: str, owner: str) -> bool:
        with self._mutex:
            held = self._live(key, self.clock())
            if held is None or held[0] != owner:
                return False
            del self._locks[key]
            return True

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        with self._mutex:
            now = self.clock()
            held = self._live(key, now)
            if held is None or held[0] != owner:
                return False
            self._locks[key] = (new_owner, now + ttl)
            return True

    def holder(self, key: str) -> LockHolder | None:
        with self._mutex:
            now = self.clock()
            held = self._live(key, now)
            return None if held is None else LockHolder(held[0], held[1] - now)

    def drop_if_owned(self, key: str, owner: str) -> None:
        held = self._locks.get(key)
        if held is not None and held[0] == owner:
            del self._locks[key]
