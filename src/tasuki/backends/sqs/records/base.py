"""What SQS keeps in its `locks=` store, as SQS cannot keep it itself: the interfaces of
the lease and id records (`LeaseRecords`) and of the workflow records beside them
(`FlowRecords`), and the values their calls carry. Every store offers the records over
its plain locks (plain.py); SQLite (sqlite.py) and Redis (redis.py) keep them in tables
or keys of their own, a batch per call, with the counts kept per record.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import orjson

from tasuki.core.flowrecords import Effects, FlowRecord, ResultRecord, ResultState
from tasuki.core.message import MessageState
from tasuki.core.records import CancelStatus, LeaseStatus, Progress, Receipt

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


class RecordView(NamedTuple):
    """What the records hold of one message, as `inspect` reads them (times: epoch s)."""

    lease_owner: str | None  # the lease record's owner; None without a lease record
    lease_until: float  # when that lease (or an ack's grace) ends; 0 for none
    receives: int  # the leases counted on the copy SQS holds
    fence: int  # the last lease's fencing number
    progress: Progress | None  # the current lease's progress
    id_owner: str | None  # the id record's owner ('' finished); None without one
    id_until: float | None  # when the id record expires


def read_progress(text: str) -> Progress | None:
    """A lease record's progress (`progress_json`), or None."""
    if not text:
        return None
    try:
        fraction, note = orjson.loads(text)
        return Progress(float(fraction), str(note or ""))
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None


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
    # Keeps workflows too (`settle_steps`, and `FlowRecords`).
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
        with `flows`, `FlowRecords`)."""
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

    def cancel_leases(self, queue: str, leases: Sequence[tuple[str, str]]) -> list[bool]:
        """Cancel each message (id, token) only if the lease `token` is its current lease
        and still live, checked and cancelled in one step per message (a lease settled
        meanwhile, or a newer lease of the message, is left alone): True for each one
        cancelled, its lease fenced out as `cancel` does (stores with `controls`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot cancel")

    def view(self, queue: str, id: str) -> RecordView:
        """The message's lease and id records, in one read (stores with `controls`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot inspect")

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


class FlowRecords(ABC):
    """Flow records and barriers kept for a backend that cannot keep them itself (SQS,
    in its lock store), beside its lease records: a settle's effects are applied there
    with the lease's token check (`LeaseRecords.settle_steps`), and the steps it
    enqueues are sent by the backend under ids claimed for their sender (`claim_sends`),
    so a re-run of the same step after a crash sends what the first run could not, and
    nothing twice once it was sent (`sent`)."""

    @abstractmethod
    def start_flow(self, record: FlowRecord) -> bool:
        """Store a new flow's record; False if a flow with its id is kept."""

    @abstractmethod
    def flow(self, flow_id: str) -> FlowRecord | None: ...

    @abstractmethod
    def cancel_flow(self, flow_id: str) -> bool:
        """Set the flow's cancelled flag; False if the flow is unknown."""

    @abstractmethod
    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        """A complete barrier's value, or None."""

    @abstractmethod
    def step_states(self, steps: Sequence[tuple[str, str]]) -> list[tuple[MessageState, int]]:
        """What the records tell of each step (queue, message id): its state and the
        leases counted on it (what `app.flow` shows where the backend cannot inspect)."""

    @abstractmethod
    def resume_steps(self, steps: Sequence[tuple[str, str, str]]) -> None:
        """Dead steps (flow id, queue, message id) re-driven: each one's dead mark goes,
        and a flow whose first failure is one of them runs again (its failure cleared)."""

    @abstractmethod
    def claim_sends(self, queue: str, ids: Sequence[str], sender: str) -> list[bool]:
        """Claim the id window of each message `sender` is about to send: True where the
        id is free, or claimed by the same sender and not sent yet (its send was cut
        short); False where it is live or finished under another claim, or sent."""

    @abstractmethod
    def sent(self, queue: str, ids: Sequence[str], sender: str) -> None:
        """The messages were sent: their claims are no longer `sender`'s to send again."""

    @abstractmethod
    def sends_made(self, queue: str, id: str) -> bool:
        """An acked step's copy met again while its lease record is UNSENT_OWNER (its
        worker died after its sends, or during them, or before): whether every step it
        enqueues was sent, by it (the id's claim says so) or before it. If so its record
        is a plain acked one from now on, as after `steps_sent`, and the copy is deleted;
        if not, it is refused, to run again once the record's grace is over."""

    @abstractmethod
    def steps_sent(self, messages: Sequence[tuple[str, str]]) -> None:
        """These acked steps (queue, id) sent everything they enqueue: their lease
        records, UNSENT_OWNER since their settle, become plain acked
        records, whose copies met again are deleted rather than run again."""
