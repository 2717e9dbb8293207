"""The lock service beside every backend: owner tokens, TTLs, owner-only release."""

from __future__ import annotations

import time

from tasuki.backends.base import Backend


class TestLocks:
    def test_acquire_is_exclusive_until_release(self, backend: Backend, key_prefix: str) -> None:
        locks, key = backend.locks, key_prefix + "a"
        assert locks.acquire(key, "alice", 30.0)
        assert not locks.acquire(key, "bob", 30.0)
        holder = locks.holder(key)
        assert holder is not None and holder.owner == "alice" and 0 < holder.expires_in <= 30.0
        assert not locks.release(key, "bob")  # not the owner: nothing changes
        assert locks.holder(key) is not None
        assert locks.release(key, "alice")
        assert locks.holder(key) is None
        assert locks.acquire(key, "bob", 30.0)

    def test_reacquire_by_owner_refreshes(self, backend: Backend, key_prefix: str) -> None:
        locks, key = backend.locks, key_prefix + "a"
        assert locks.acquire(key, "alice", 0.3)
        assert locks.acquire(key, "alice", 30.0)
        holder = locks.holder(key)
        assert holder is not None and holder.expires_in > 1.0

    def test_lock_lapses_after_ttl(self, backend: Backend, key_prefix: str) -> None:
        locks, key = backend.locks, key_prefix + "a"
        assert locks.acquire(key, "alice", 0.2)
        time.sleep(0.25)
        assert locks.holder(key) is None
        assert locks.acquire(key, "bob", 30.0)
        # the stale owner can neither renew nor release the new holder's lock
        assert locks.renew([key], "alice", 30.0) == [False]
        assert not locks.release(key, "alice")
        assert not locks.swap(key, "alice", "mallory", 30.0)
        holder = locks.holder(key)
        assert holder is not None and holder.owner == "bob"

    def test_renew_extends_only_own_locks(self, backend: Backend, key_prefix: str) -> None:
        locks = backend.locks
        a, b, c = (key_prefix + x for x in "abc")
        locks.acquire(a, "alice", 0.3)
        locks.acquire(b, "bob", 30.0)
        assert locks.renew([a, b, c], "alice", 30.0) == [True, False, False]
        time.sleep(0.35)
        holder = locks.holder(a)
        assert holder is not None and holder.owner == "alice"

    def test_swap_hands_lock_to_new_owner(self, backend: Backend, key_prefix: str) -> None:
        locks, key = backend.locks, key_prefix + "a"
        locks.acquire(key, "alice", 30.0)
        assert locks.swap(key, "alice", "done", 60.0)
        holder = locks.holder(key)
        assert holder is not None and holder.owner == "done" and holder.expires_in > 30.0
        assert not locks.release(key, "alice")
