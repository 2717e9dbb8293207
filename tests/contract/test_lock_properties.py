"""Properties of the lock service: no interleaving ever gives one lock to two owners."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tasuki.backends.base import Backend, LockHolder, LockStore
from tasuki.backends.memory import MemoryBackend
from tasuki.backends.redis.backend import RedisBackend
from tasuki.backends.redis.connection import parse_url
from tasuki.backends.sqlite import SQLiteBackend
from tests.support.servers import RedisServer

OWNERS = st.sampled_from(["alice", "bob", "carol", "done"])
KEYS = st.sampled_from(["{q}k1", "{q}k2"])
TTLS = st.sampled_from([0.5, 1.0, 5.0])


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def lock_machine(make_store: Any, make_clock: Any = Clock) -> type[RuleBasedStateMachine]:
    class LockMachine(RuleBasedStateMachine):
        """Random acquire/renew/release/swap/expire by several owners, against a model."""

        def __init__(self) -> None:
            super().__init__()
            self.clock = make_clock()
            self.store: LockStore = make_store(self.clock)
            self.model: dict[str, tuple[str, float]] = {}

        def live(self, key: str) -> str | None:
            held = self.model.get(key)
            return held[0] if held and held[1] > self.clock.now else None

        @rule(owner=OWNERS, key=KEYS, ttl=TTLS)
        def acquire(self, owner: str, key: str, ttl: float) -> None:
            holder = self.live(key)
            got = self.store.acquire(key, owner, ttl)
            assert got == (holder in (None, owner)), (key, owner, holder)
            if got:
                self.model[key] = (owner, self.clock.now + ttl)

        @rule(owner=OWNERS, key=KEYS, ttl=TTLS)
        def renew(self, owner: str, key: str, ttl: float) -> None:
            ok = self.store.renew([key], owner, ttl) == [True]
            assert ok == (self.live(key) == owner)
            if ok:
                self.model[key] = (owner, self.clock.now + ttl)

        @rule(owner=OWNERS, key=KEYS)
        def release(self, owner: str, key: str) -> None:
            ok = self.store.release(key, owner)
            assert ok == (self.live(key) == owner)
            if ok:
                del self.model[key]

        @rule(owner=OWNERS, new=OWNERS, key=KEYS, ttl=TTLS)
        def swap(self, owner: str, new: str, key: str, ttl: float) -> None:
            ok = self.store.swap(key, owner, new, ttl)
            assert ok == (self.live(key) == owner)
            if ok:
                self.model[key] = (new, self.clock.now + ttl)

        @rule(seconds=st.sampled_from([0.1, 0.49, 0.5, 0.51, 1.0, 3.0]))
        def time_passes(self, seconds: float) -> None:
            self.clock.now += seconds

        @invariant()
        def holders_agree(self) -> None:
            for key in ("{q}k1", "{q}k2"):
                holder = self.store.holder(key)
                assert (holder.owner if holder else None) == self.live(key)

        def teardown(self) -> None:
            close = getattr(self.store, "close", None)
            if close is not None:
                close()

    return LockMachine


def _memory_store(clock: Clock) -> LockStore:
    store = MemoryBackend().locks
    store.clock = clock
    return store


_tmp: list[Path] = []


def _sqlite_store(clock: Clock) -> LockStore:
    backend = SQLiteBackend(str(_tmp[0] / f"locks-{time.monotonic_ns()}.db"))
    store = backend.locks
    store.clock = clock
    return store


TestMemoryLockProperties = lock_machine(_memory_store).TestCase
TestMemoryLockProperties.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None
)


@pytest.fixture(autouse=True)
def _sqlite_dir(tmp_path: Path) -> None:
    _tmp[:] = [tmp_path]


TestSQLiteLockProperties = lock_machine(_sqlite_store).TestCase
TestSQLiteLockProperties.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


# Redis keeps TTLs on its own clock, which the model cannot move. So the model's clock
# drives the server: every TTL is stretched SCALE times (a step of the test takes
# milliseconds, the stretched TTLs last minutes), and when model time passes, each lock
# is expired (DEL) or given its remaining model time as PTTL, exactly where the model
# expires it. Everything else (who may take, renew, release or swap a lock) is decided
# by the Lua scripts, which is what this checks.
SCALE = 100.0
_redis_url: list[str] = []


class _ScaledRedisLocks(LockStore):
    def __init__(self, clock: _RedisClock) -> None:
        self.backend = RedisBackend(parse_url(f"{_redis_url[0]}?prefix=p-{uuid.uuid4().hex}:"))
        self.inner = self.backend.locks
        self.clock = clock
        self.expiry: dict[str, float] = {}  # key -> model time it lapses at

    def _held(self, key: str, ttl: float) -> None:
        self.expiry[key] = self.clock.now + ttl

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        ok = self.inner.acquire(key, owner, ttl * SCALE)
        if ok:
            self._held(key, ttl)
        return ok

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        results = self.inner.renew(keys, owner, ttl * SCALE)
        for key, ok in zip(keys, results, strict=True):
            if ok:
                self._held(key, ttl)
        return results

    def release(self, key: str, owner: str) -> bool:
        ok = self.inner.release(key, owner)
        if ok:
            self.expiry.pop(key, None)
        return ok

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        ok = self.inner.swap(key, owner, new_owner, ttl * SCALE)
        if ok:
            self._held(key, ttl)
        return ok

    def holder(self, key: str) -> LockHolder | None:
        return self.inner.holder(key)

    def close(self) -> None:
        self.backend.close()


class _RedisClock(Clock):
    """The model's clock; setting `now` expires or shortens the server's lock keys."""

    def __init__(self) -> None:
        self._now = 1_000_000.0
        self.locks: _ScaledRedisLocks | None = None

    @property  # type: ignore[override]
    def now(self) -> float:
        return self._now

    @now.setter
    def now(self, value: float) -> None:
        self._now = value
        if self.locks is None:
            return
        client = redis.Redis.from_url(_redis_url[0])
        try:
            for key, lapses_at in list(self.locks.expiry.items()):
                full = self.locks.backend.keys.lock(key)
                if lapses_at > value:  # the model's own test for a live lock
                    left_ms = (lapses_at - value) * SCALE * 1000
                    client.pexpire(full, max(5000, int(left_ms)))
                else:
                    client.delete(full)
                    del self.locks.expiry[key]
        finally:
            client.close()


def _redis_store(clock: _RedisClock) -> LockStore:
    clock.locks = _ScaledRedisLocks(clock)
    return clock.locks


@pytest.fixture(autouse=True)
def _redis_server_url(redis_server: RedisServer) -> None:
    _redis_url[:] = [redis_server.url()]


TestRedisLockProperties = lock_machine(_redis_store, _RedisClock).TestCase
TestRedisLockProperties.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


def test_threads_never_share_a_lock(backend: Backend, key_prefix: str) -> None:
    """Real time, real backend: many owners race for one key; never two inside at once."""
    key = key_prefix + "{q}race"
    inside: list[str] = []
    violations: list[str] = []
    entries = [0]
    mutex = threading.Lock()

    def contender(owner: str) -> None:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if not backend.locks.acquire(key, owner, 5.0):
                continue
            with mutex:
                if inside:
                    violations.append(f"{owner} entered while {inside} held it")
                inside.append(owner)
                entries[0] += 1
            time.sleep(0.001)
            with mutex:
                inside.remove(owner)
            assert backend.locks.release(key, owner)

    threads = [threading.Thread(target=contender, args=(f"owner-{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not violations
    assert entries[0] > 4
