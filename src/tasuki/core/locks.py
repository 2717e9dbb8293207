"""The lock store: the locks behind dedup and uniqueness, and the records kept beside them
for a backend that cannot keep them itself.

Defined in the core because the middleware needs it and every backend implements it;
`App(locks=...)` may also hand one from another store (SQS has none of its own).

Beyond locks, a store offers services by capability: each is a method that returns the
service, so a caller asks the store for what it needs instead of guessing from its type.
`lease_records` is the first: what a backend that cannot refuse a stale receipt (SQS)
keeps to fence its leases and make enqueue idempotent. Every store has it over its plain
locks; a store that can do better (a batch per call, counts kept per record) overrides
it. Another service (results and workflow state for SQS, say) is one more such method.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import orjson

from tasuki.core.flowrecords import Effects, ResultRecord, ResultState
from tasuki.core.records import CancelStatus, LeaseStatus, LockHolder, Progress, Receipt

# The owner of a cancelled message's lease record: this prefix, then the token of the
# lease that ran when it was cancelled ('' if none did). No lease token starts with it.
CANCELLED_OWNER = "~cancelled~"
# The owner of an acked workflow step's lease record while the steps it enqueues are
# still to be sent (`Settled.go_on`), until `FlowRecords.steps_sent`: this prefix, then
# the (queue, id) of each of those steps as JSON (`unsent_owner`). The same copy met
# meanwhile is UNSENT_TAKE: deleted if every one of them was sent (its worker died after
# its sends, before it said so: `FlowRecords.sends_made`), else refused as if leased, to
# run again once the record's grace is over and send what a crash left unsent. Once they
# are sent the record is an acked one like any other: a copy met again (its delete
# failed) is deleted (ACKED_TAKE).
UNSENT_OWNER = "~unsent~"


def unsent_owner(sends: Sequence[tuple[str, str]]) -> str:
    """The owner of a step's lease record whose `sends` (queue, id) are still to be sent."""
    return UNSENT_OWNER + orjson.dumps([list(s) for s in sends]).decode()


def unsent_sends(owner: str) -> list[tuple[str, str]] | None:
    """The sends an UNSENT owner waits for; None for any other owner."""
    if not owner.startswith(UNSENT_OWNER):
        return None
    try:
        return [(str(q), str(i)) for q, i in orjson.loads(owner[len(UNSENT_OWNER) :] or "[]")]
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None


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

    def lease_records(self, namespace: str, lifetimes: RecordLifetimes) -> LeaseRecords:
        """Lease and id records under `namespace` (see `LeaseRecords`). This default keeps
        them as plain locks, one or two calls per record and no counts of its own; a
        store that writes a batch per call and keeps the counts overrides it."""
        return PlainLeaseRecords(self, namespace, lifetimes)


@dataclass(frozen=True, slots=True)
class RecordLifetimes:
    """How long records live, in seconds, as the backend that keeps them needs."""

    # A lease record after its last write: longer than any lease can last (SQS: its
    # 12-hour visibility limit), so a record still tells a lapsed lease from none.
    lease: float
    # An id record while its message lives: as long as the transport keeps a message.
    id: float
    # An acked lease's record, refusing a late second delivery of the same copy.
    acked: float = 300.0


class LeaseTake(NamedTuple):
    """One received copy of a message whose lease is to be recorded."""

    queue: str
    id: str
    token: str  # the lease token (SQS: the receipt handle)
    copy: str  # the transport's id of the copy received (SQS: its MessageId)
    receive_count: int  # the transport's count of receives of that copy (approximate on SQS)
    fence: int  # the fencing number counted from the message (its base + count)
    visibility: float
    # The copy was first received less than a lease record's lifetime ago: every lease
    # granted on it since then is still on record, so no record of it means none was
    # (its first lease is the first). Otherwise its record may have expired: the
    # receive count it is.
    fresh: bool
    # No one can have enqueued the message's id again within an acked record's grace
    # (its id window outlasts that grace, or the producer made the id for this one
    # enqueue), so another copy of it met while its record says acked is a second send
    # of the same message (a send retried after its reply was lost), not to run:
    # ACKED_TAKE.
    once: bool = False

    def first(self) -> int:
        """The receives to count where the store has no record of this copy."""
        return 1 if self.fresh else self.receive_count


class Granted(NamedTuple):
    """What a recorded lease was granted."""

    fence: int
    receives: int  # leases granted on the copy, this one included
    # The message's last lease was taken and never settled (it expired): what a lease
    # that finds the message out of attempts says it died of.
    lapsed: bool


# What `take` grants a copy of a cancelled message: not to run, to be deleted.
CANCELLED_TAKE = Granted(-1, 0, False)
# What `take` grants the very copy whose lease was acked (or dead-lettered) a moment ago,
# met again: its delete failed after the record was settled, or the transport delivered
# it twice. Not to run, and to be deleted: left alone it would come back until the
# record's grace ran out, then run a second time.
ACKED_TAKE = Granted(-2, 0, False)
# What `take` grants the copy of an acked workflow step met again while its record is
# UNSENT (see UNSENT_OWNER): deleted if its sends were all made, else refused.
UNSENT_TAKE = Granted(-3, 0, False)


class LeaseEnd(NamedTuple):
    """A lease to settle, and whether its message was acked (gone) or handed back."""

    receipt: Receipt
    acked: bool
    # The message's result ("ok" or "failed", and its JSON), written with the settle
    # where its lease is current and the message keeps a result (`ResultPut`).
    result: tuple[ResultState, bytes] | None = None
    # A workflow step's follow-ups (`Effects`): with stores that keep `flows`, applied in
    # the same step as the token check; what it enqueues is the caller's to send.
    effects: Effects | None = None


class Settled(NamedTuple):
    """What `settle_steps` did with one lease."""

    current: bool  # the token was current: the lease is settled
    # Its effects decided to go on: the caller sends `effects.enqueue` (before it deletes
    # the message). True again for a re-run of the same message (a crash between the
    # settle and the send), never for another message meeting a set already complete.
    go_on: bool = False


class ResultPut(NamedTuple):
    """A result record to write: "pending" with `keep` (the message's keep_result, kept
    in the record) makes one at enqueue; "pending" without `keep` makes an existing one
    pending again (a redrive); "ok" / "failed" settle an existing one, kept `keep` s
    from now as the record says. Where no record exists, nothing is kept."""

    queue: str
    id: str
    state: ResultState
    value: bytes | None = None
    keep: float | None = None


class IdClaim(NamedTuple):
    queue: str
    id: str
    owner: str  # a random owner per enqueue, so the same id offered twice meets it


class IdFinish(NamedTuple):
    queue: str
    id: str
    owner: str  # '' for whoever holds it
    keep: float  # keep the id this long more; 0 forgets it now


class LeaseRecords(ABC):
    """What a backend that cannot fence its own leases keeps in the lock store.

    A lease record per message, `lease:QUEUE:ID`, names the current lease's token; every
    settle and extension first compares it, so a worker whose lease lapsed and was taken
    by another is refused before anything reaches the transport. It keeps the last
    lease's fencing number and counts the leases granted on the copy it names (the
    transport's own receive count also counts a receive refused as a duplicate), and
    outlives an expired lease, which is how a lease that finds a message out of
    attempts knows its last lease lapsed. An id record per message, `id:QUEUE:ID`, is the
    id window of idempotent enqueue: its owner is the enqueue's while the message lives,
    '' once it is finished (acked and kept, dead, cancelled). Every call takes a batch.
    `take` answers None for a copy another live lease holds (to come back later) and
    ACKED_TAKE for the very copy acked a moment ago (to be deleted).

    Stores with `controls` also cancel (a cancelled message's lease record names
    CANCELLED_OWNER: `take` answers CANCELLED_TAKE, settles and renewals are refused),
    keep progress in the lease record (`keep`), and keep result records,
    `result:QUEUE:ID` (on Redis in the lease record's slot), written by the settle of
    the current lease (`LeaseEnd.result`) and by `put_results`.
    """

    controls = False
    # Keeps workflows too (`settle_steps`, and `core/flowrecords.FlowRecords`).
    flows = False

    def __init__(self, namespace: str, lifetimes: RecordLifetimes) -> None:
        self.namespace = namespace
        self.lifetimes = lifetimes

    def lease_key(self, queue: str, id: str) -> str:
        return f"{self.namespace}lease:{queue}:{id}"

    def id_key(self, queue: str, id: str) -> str:
        return f"{self.namespace}id:{queue}:{id}"

    @abstractmethod
    def take(self, takes: Sequence[LeaseTake]) -> list[Granted | None]:
        """Record each token as its message's current lease, replacing a lapsed or
        settled one, with a fencing number and a count of the leases on its copy, as
        `grant` decides. None where another lease of the message is still live, or where
        this very copy was acked a moment ago (delivered twice): not to be delivered,
        and not counted."""

    @abstractmethod
    def settle(self, ends: Sequence[LeaseEnd]) -> list[bool]:
        """End each lease whose token is still current; False where stale. The record
        stays without an owner: for its count of leases, or, acked, for
        `lifetimes.acked`, so that a late second delivery of the same copy is refused."""

    def settle_steps(self, ends: Sequence[LeaseEnd]) -> list[Settled]:
        """`settle`, applying each current lease's `effects` in the same step (stores
        with `flows`, `core/flowrecords.FlowRecords`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no workflows")

    @abstractmethod
    def renew(self, leases: Sequence[Receipt], visibility: float) -> list[bool]:
        """Renew each lease record whose token is still current; False where stale."""

    def keep(
        self, leases: Sequence[tuple[Receipt, Progress | None]], visibility: float
    ) -> list[LeaseStatus]:
        """`renew`, and the progress stored for the current lease: "held", "lost" (stale),
        "cancelled" (the lease was current when its message was cancelled)."""
        renewed = self.renew([receipt for receipt, _ in leases], visibility)
        return ["held" if ok else "lost" for ok in renewed]

    def cancel(self, queue: str, id: str) -> CancelStatus:
        """Cancel a message the records know: its id finished (still known), its lease
        record marked cancelled. "signalled" if a lease holds it now, "removed" if not
        (the transport still holds it until it is next received), "unknown" if its id is
        unknown or finished."""
        raise NotImplementedError(f"{type(self).__name__} cannot cancel")

    def result_key(self, queue: str, id: str) -> str:
        return f"{self.namespace}result:{queue}:{id}"

    def put_results(self, puts: Sequence[ResultPut]) -> None:
        """Write result records (see `ResultPut`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no results")

    def result(self, queue: str, id: str) -> ResultRecord | None:
        """The message's result record, or None (none kept, or expired)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no results")

    def drop_results(self, messages: Sequence[tuple[str, str]]) -> None:
        """Forget the result records of messages (queue, id) (purged)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no results")

    @abstractmethod
    def forget(self, messages: Sequence[tuple[str, str]]) -> None:
        """Drop the lease records of messages (queue, id) that are gone (dead-lettered,
        purged)."""

    @abstractmethod
    def claim_ids(self, claims: Sequence[IdClaim]) -> list[bool]:
        """False for each id already known (queued, in flight, dead or kept)."""

    @abstractmethod
    def finish_ids(self, done: Sequence[IdFinish]) -> None:
        """Keep each id `keep` s more, finished (its owner ''), or forget it now."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the records hold of their own (a connection)."""


def progress_json(progress: Progress) -> str:
    """A lease's progress as its record keeps it: JSON on one line."""
    return orjson.dumps([progress.fraction, progress.text]).decode()


def grant(take: LeaseTake, last: tuple[int, str, str, int] | None) -> tuple[int, int]:
    """The (fence, receives) of a lease taken over the message's record `last` (fence,
    owner, copy, receives), or over none: one more than the last lease's fence where
    that is higher than the counted one (a receive count can come back lower); one more
    than the leases on record for the same copy; the receive count where another copy's
    lease was never settled (it may have runs no record saw); else `take.first()`.
    Stores that decide in their own language (Lua) write the same rule."""
    if last is None:
        return take.fence, take.first()
    fence, owner, copy, receives = last
    if copy == take.copy:
        counted = receives + 1 if receives else take.receive_count  # 0: a record before counts
    elif owner:
        counted = take.receive_count
    else:  # a settled copy (the one re-sent as this one, typically)
        counted = take.first()
    return max(take.fence, fence + 1), counted


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
