"""What SQS cannot keep, kept in a lock store (`locks=`): lease records and the id window.

SQS cannot refuse a stale receipt handle: AWS documents that an old handle may still
delete a message, and the local test server always lets it. So, with `locks=`, every
lease writes a record `lease:QUEUE:ID -> receipt handle`, and ack, extend, release and
bury first compare-and-delete (or compare-and-renew) that record: a worker whose lease
lapsed and was taken by another lease finds someone else's handle there and is refused
before anything reaches SQS. The record outlives an expired lease (its TTL is SQS's
12-hour visibility limit plus a margin), which is also how a lease that finds a message
out of attempts knows its last lease expired rather than being released.

The id window (idempotent enqueue by id) is a second record, `id:QUEUE:ID`, taken with a
random owner at enqueue (so the same id offered twice meets a held record: duplicate),
kept while the message lives or is dead, and given the message's `keep_id` TTL at ack.

Records are plain `LockStore` locks (acquire/swap/release/renew/holder), so any lock
store works: `sqlite:///...` or `redis://...`.
"""

from __future__ import annotations

from tasuki.backends.base import LockStore
from tasuki.backends.sqs.options import SQS_MAX_RETENTION, SQS_MAX_VISIBILITY

LEASE_TTL = SQS_MAX_VISIBILITY + 600.0
ID_TTL = float(SQS_MAX_RETENTION)


class Fences:
    def __init__(self, locks: LockStore, prefix: str) -> None:
        self.locks = locks
        self._prefix = f"tasuki-sqs:{prefix}"

    def _lease(self, queue: str, id: str) -> str:
        return f"{self._prefix}lease:{queue}:{id}"

    def _id(self, queue: str, id: str) -> str:
        return f"{self._prefix}id:{queue}:{id}"

    # -- leases ----------------------------------------------------------------------
    def take(self, queue: str, id: str, token: str) -> None:
        """Record `token` as the message's current lease, replacing any earlier one."""
        key = self._lease(queue, id)
        for _ in range(5):
            holder = self.locks.holder(key)
            if holder is None:
                if self.locks.acquire(key, token, LEASE_TTL):
                    return
            elif self.locks.swap(key, holder.owner, token, LEASE_TTL):
                return
        raise RuntimeError(f"could not record the lease of {queue}/{id}")

    def settle(self, queue: str, id: str, token: str) -> bool:
        """Delete the lease record if `token` is still the current lease."""
        return self.locks.release(self._lease(queue, id), token)

    def current(self, queue: str, id: str, token: str) -> bool:
        return self.locks.renew([self._lease(queue, id)], token, LEASE_TTL)[0]

    def lapsed(self, queue: str, id: str) -> bool:
        """A lease of the message was taken and never settled (it expired)."""
        return self.locks.holder(self._lease(queue, id)) is not None

    def forget_lease(self, queue: str, id: str) -> None:
        key = self._lease(queue, id)
        holder = self.locks.holder(key)
        if holder is not None:
            self.locks.release(key, holder.owner)

    # -- the id window ---------------------------------------------------------------
    def claim_id(self, queue: str, id: str, owner: str) -> bool:
        """False when the id is already known (queued, in flight, dead or kept)."""
        return self.locks.acquire(self._id(queue, id), owner, ID_TTL)

    def finish_id(self, queue: str, id: str, owner: str, keep: float) -> None:
        key = self._id(queue, id)
        if not owner:
            holder = self.locks.holder(key)
            if holder is None:
                return
            owner = holder.owner
        if keep > 0:
            self.locks.swap(key, owner, owner, keep)
        else:
            self.locks.release(key, owner)
