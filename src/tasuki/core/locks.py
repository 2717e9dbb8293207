"""The lock store: the locks behind dedup and uniqueness.

Defined in the core because the middleware needs it and every backend implements it;
`App(locks=...)` may also hand one from another store (SQS has none of its own). What
SQS keeps beside the locks of its `locks=` store (its lease, id and workflow records)
is SQS's own: `tasuki/backends/sqs/records/`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from tasuki.core.records import LockHolder


class LockStore(ABC):
    """Locks with an owner token and a TTL, the base of dedup and uniqueness.

    Only the owner can renew or release, by atomic compare-and-act on the server, so a
    stale owner (its lock lapsed and someone else took it) can never touch the new
    holder's lock.
    """

    @abstractmethod
    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        """Take the lock if free or lapsed; re-acquiring one's own lock refreshes its TTL."""

    @abstractmethod
    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        """Extend locks still held by `owner`; False for each one it no longer holds."""

    @abstractmethod
    def release(self, key: str, owner: str) -> bool:
        """Delete the lock only if `owner` still holds it."""

    @abstractmethod
    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        """Hand a held lock to `new_owner` with a new TTL (compare-and-set on the owner)."""

    @abstractmethod
    def holder(self, key: str) -> LockHolder | None:
        """Who holds the lock now, or None if free or lapsed."""
