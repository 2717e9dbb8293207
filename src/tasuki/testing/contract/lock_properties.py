"""Properties of the lock service: no interleaving ever gives one lock to two owners."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from tasuki.backends.base import Backend, LockHolder, LockStore
from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.fixtures import new_url, options_of

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


# Lock stores whose TTLs run on the model's clock (the store's `clock` attribute) are
# driven directly. A store that keeps TTLs on its server's clock (Redis), which the model
# cannot move, is driven the other way round: every TTL is stretched SCALE times (a step
# of the test takes milliseconds, the stretched TTLs last minutes), and when model time
# passes, each lock is lapsed or given its remaining model time exactly where the model
# expires it. Everything else (who may take, renew, release or swap a lock) is decided by
# the server, which is what this checks.
SCALE = 100.0


class _ScaledLocks(LockStore):
    def __init__(self, backend: Backend, expire: Any) -> None:
        self.backend = backend
        self.inner = backend.locks
        self.expire = expire
        self.expiry: dict[str, float] = {}  # key -> model time it lapses at
        self.now = 0.0

    def _held(self, key: str, ttl: float) -> None:
        self.expiry[key] = self.now + ttl

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

    def time_passes(self, now: float) -> None:
        self.now = now
        for key, lapses_at in list(self.expiry.items()):
            if lapses_at > now:  # the model's own test for a live lock
                self.expire(self.backend, key, max(5.0, (lapses_at - now) * SCALE))
            else:
                self.expire(self.backend, key, None)
                del self.expiry[key]

    def close(self) -> None:
        self.backend.close()


class _DrivenClock(Clock):
    """The model's clock; setting `now` also moves a server-clock store (`_ScaledLocks`)."""

    def __init__(self) -> None:
        self._now = 1_000_000.0
        self.scaled: _ScaledLocks | None = None

    @property
    def now(self) -> float:
        return self._now

    @now.setter
    def now(self, value: float) -> None:
        self._now = value
        if self.scaled is not None:
            self.scaled.time_passes(value)


class _ClosingStore(LockStore):
    """A store driven by its `clock` attribute, closing its backend at teardown."""

    def __init__(self, backend: Backend, clock: Clock) -> None:
        self.backend = backend
        locks: Any = backend.locks
        locks.clock = clock
        self.inner: Any = locks

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        return bool(self.inner.acquire(key, owner, ttl))

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        return list(self.inner.renew(keys, owner, ttl))

    def release(self, key: str, owner: str) -> bool:
        return bool(self.inner.release(key, owner))

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        return bool(self.inner.swap(key, owner, new_owner, ttl))

    def holder(self, key: str) -> LockHolder | None:
        holder: LockHolder | None = self.inner.holder(key)
        return holder

    def close(self) -> None:
        self.backend.close()


class TestLockProperties:
    def test_lock_properties(
        self, make_backend_url: Callable[[], str], request: pytest.FixtureRequest
    ) -> None:
        """Each example on a fresh store of the backend."""
        options = options_of(request)
        expire = options.expire_lock
        if expire is None:
            probe = backend_from_url(new_url(make_backend_url))
            try:
                if not hasattr(probe.locks, "clock"):
                    pytest.skip(
                        "the lock store has no `clock` attribute to drive, and the backend "
                        "gives no expire_lock in its contract_options"
                    )
            finally:
                probe.close()

        def make_store(clock: _DrivenClock) -> LockStore:
            backend = backend_from_url(new_url(make_backend_url))
            if expire is None:
                return _ClosingStore(backend, clock)
            clock.scaled = _ScaledLocks(backend, expire)
            clock.scaled.now = clock.now
            return clock.scaled

        machine = lock_machine(make_store, _DrivenClock)
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=options.lock_examples,
                stateful_step_count=options.lock_steps,
                deadline=None,
            ),
        )

    def test_threads_never_share_a_lock(self, backend: Backend, key_prefix: str) -> None:
        """Real time, real backend: many owners race for one key; never two inside at once."""
        key = key_prefix + "{q}race"
        inside: list[str] = []
        violations: list[str] = []
        entries = [0]
        mutex = threading.Lock()

        # Until the lock changed hands 20 times: on a busy machine that takes longer than
        # on a quiet one, so the race is as long as it needs to be, up to 10 s.
        def contender(owner: str) -> None:
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline and entries[0] < 20:
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
