"""The records over the plain locks of any store (memory, PostgreSQL, or any other):
one or two lock calls per record, no counts of their own."""

from __future__ import annotations

from collections.abc import Sequence

from tasuki.backends.sqs.records.base import (
    Granted,
    IdClaim,
    IdFinish,
    LeaseEnd,
    LeaseRecords,
    LeaseTake,
    RecordLifetimes,
)
from tasuki.core.locks import LockStore
from tasuki.core.records import Receipt


class PlainLeaseRecords(LeaseRecords):
    """Records as plain locks of any store: one or two calls per record. Plain locks keep
    no numbers, so the fence and the receives granted are the message's own counts."""

    def __init__(self, locks: LockStore, namespace: str, lifetimes: RecordLifetimes) -> None:
        super().__init__(namespace, lifetimes)
        self.locks = locks

    def take(self, takes: Sequence[LeaseTake]) -> list[Granted | None]:
        granted: list[Granted | None] = []
        ttl = self.lifetimes.lease
        for take in takes:
            key = self.lease_key(take.queue, take.id)
            for _ in range(5):
                holder = self.locks.holder(key)
                if holder is None:
                    if self.locks.acquire(key, take.token, ttl):
                        break
                elif self.locks.swap(key, holder.owner, take.token, ttl):
                    break
            else:
                raise RuntimeError(f"could not record the lease of {take.queue}/{take.id}")
            granted.append(Granted(take.fence, take.receive_count, holder is not None))
        return granted

    def settle(self, ends: Sequence[LeaseEnd]) -> list[bool]:
        return [self.locks.release(self.lease_key(q, i), t) for (q, i, t), *_ in ends]

    def renew(self, leases: Sequence[Receipt], visibility: float) -> list[bool]:
        ttl = self.lifetimes.lease
        return [self.locks.renew([self.lease_key(q, i)], t, ttl)[0] for q, i, t in leases]

    def forget(self, messages: Sequence[tuple[str, str]]) -> None:
        for queue, id in messages:
            key = self.lease_key(queue, id)
            holder = self.locks.holder(key)
            if holder is not None:
                self.locks.release(key, holder.owner)

    def claim_ids(self, claims: Sequence[IdClaim]) -> list[bool]:
        ttl = self.lifetimes.id
        return [self.locks.acquire(self.id_key(q, i), owner, ttl) for q, i, owner in claims]

    def finish_ids(self, done: Sequence[IdFinish]) -> None:
        for queue, id, given, keep in done:
            key = self.id_key(queue, id)
            owner = given
            if not owner:
                holder = self.locks.holder(key)
                if holder is None:
                    continue
                owner = holder.owner
            if keep > 0:
                self.locks.swap(key, owner, owner, keep)
            else:
                self.locks.release(key, owner)
