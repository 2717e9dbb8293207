"""Properties of the lock service: no interleaving ever gives one lock to two owners."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tasuki.backends.base import Backend, LockStore
from tasuki.backends.memory import MemoryBackend
from tasuki.backends.sqlite import SQLiteBackend

OWNERS = st.sampled_from(["alice", "bob", "carol", "done"])
KEYS = st.sampled_from(["{q}k1", "{q}k2"])
TTLS = st.sampled_from([0.5, 1.0, 5.0])


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def lock_machine(make_store: Any) -> type[RuleBasedStateMachine]:
    class LockMachine(RuleBasedStateMachine):
        """Random acquire/renew/release/swap/expire by several owners, against a model."""

        def __init__(self) -> None:
            super().__init__()
            self.clock = Clock()
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
