"""The seam every backend plugs into.

A backend stores messages and enforces the lifecycle of DESIGN §2 *itself*, atomically:
lease tokens, attempts, expiry, dead-lettering of exhausted messages. Nothing above this
interface does read-modify-write on backend state, which is what lets several worker
processes on several machines share a queue safely.

Every settling operation takes a batch, because the round trip, not the work, is what a
network backend pays for. Backends that can't do a batch in one trip loop internally.
Times passed in are *relative* (seconds from now, measured by the backend's clock), so
producers and workers on machines with skewed clocks still agree.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, NamedTuple

from tasuki.message import DeadLetter, ErrorInfo, Lease, Message

DEFAULT_VISIBILITY_TIMEOUT = 30.0
FOREVER = 10 * 365 * 86400.0
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can and cannot do natively.

    The App and the runtime read these instead of guessing from a URL: a promise the
    backend cannot keep natively is kept another way (delay hops, the `locks=` store) or
    refused at configuration time with an error that names the missing capability.
    """

    max_message_size: int
    # Several processes (and machines) can share the store.
    cross_process: bool = True
    # `lease(wait=...)` blocks until a message arrives, instead of the caller polling.
    blocking_wait: bool = True
    # Longest delay the backend stores in one go (None: unbounded); longer ones hop.
    max_delay: float | None = None
    # Longest lease one extension can grant (None: unbounded).
    max_visibility: float | None = None
    # `attempt` is counted exactly by the backend (not an approximate receive count).
    exact_attempts: bool = True
    # A release without penalty gives the attempt back.
    refundable_release: bool = True
    # Finished caller-given ids are remembered for the id window (idempotent enqueue).
    id_window: bool = True
    # A unique claim is taken atomically with the enqueue.
    atomic_unique: bool = True
    # Dead letters can be paged and looked up by id.
    dead_letter_browsing: bool = True
    # Enqueue can join the caller's own database transaction.
    transactional_enqueue: bool = False
    # The backend has a lock store of its own (else the App needs `locks=`).
    native_locks: bool = True
    # Stats are exact (else approximate, as the engine reports them).
    exact_stats: bool = True
    # A stale lease token is refused by ack, extend, release and bury.
    fencing: bool = True
    # Smallest step of delays and visibility timeouts the backend keeps, in seconds
    # (0: as fine as its clock; SQS: whole seconds).
    timer_resolution: float = 0.0


class UniqueClaim(NamedTuple):
    """Take lock `key` for the message being enqueued, atomically with the enqueue.

    If a live holder exists the message is not stored; with `replace`, a holder that is
    still waiting gets the new body and headers.
    """

    key: str
    ttl: float
    replace: bool = False


class Envelope(NamedTuple):
    """A message on its way in, with the per-message settings the backend enforces.

    A named tuple, not a dataclass: bulk enqueue builds tens of thousands a second.
    `headers` must not be mutated (the default is shared).
    """

    queue: str
    id: str
    body: bytes
    headers: Mapping[str, str] = _NO_HEADERS
    delay: float = 0.0
    max_attempts: int = 10
    visibility_timeout: float | None = None
    keep_id: float = 0.0
    unique: UniqueClaim | None = None


EnqueueStatus = Literal["enqueued", "duplicate", "conflict", "replaced"]


class Enqueued(NamedTuple):
    """Result of one enqueue.

    `duplicate`: the id was already known (queued, in flight, dead, or finished within
    its window) and nothing changed. `conflict` / `replaced`: a unique claim met a live
    holder; `id` is then the holder's id, the message that will do the work.
    """

    id: str
    status: EnqueueStatus


class Receipt(NamedTuple):
    """What settles a delivery: the message and the token of the lease being settled."""

    queue: str
    id: str
    token: str


class Release(NamedTuple):
    receipt: Receipt
    delay: float = 0.0
    penalty: bool = True


class Bury(NamedTuple):
    receipt: Receipt
    reason: str
    error: ErrorInfo | None = None


class Delivery(NamedTuple):
    """One leased message as the backend hands it out (a named tuple: made per message)."""

    queue: str
    id: str
    body: bytes
    headers: Mapping[str, str]
    attempt: int
    max_attempts: int
    enqueued_at: float
    token: str
    fencing_token: int
    visibility_timeout: float

    @property
    def receipt(self) -> Receipt:
        return Receipt(self.queue, self.id, self.token)

    def to_message(self) -> Message:
        return Message(
            id=self.id,
            queue=self.queue,
            body=self.body,
            headers=self.headers,
            attempt=self.attempt,
            enqueued_at=self.enqueued_at,
            lease=Lease(self.token, self.fencing_token, self.visibility_timeout),
            max_attempts=self.max_attempts,
        )


@dataclass(frozen=True, slots=True)
class QueueStats:
    ready: int
    in_flight: int
    delayed: int
    dead: int
    oldest_ready_age: float

    def as_dict(self) -> dict[str, float]:
        return {
            "ready": self.ready,
            "in_flight": self.in_flight,
            "delayed": self.delayed,
            "dead": self.dead,
            "oldest_ready_age": self.oldest_ready_age,
        }


@dataclass(frozen=True, slots=True)
class LockHolder:
    owner: str
    expires_in: float


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


class Backend(ABC):
    """A message store that enforces the tasuki lifecycle. See the module docstring."""

    url: str
    capabilities: Capabilities

    # -- producing -------------------------------------------------------------------
    @abstractmethod
    def enqueue(self, envelopes: Sequence[Envelope]) -> list[Enqueued]:
        """Store messages; ids already known make no change (idempotent enqueue)."""

    # -- consuming -------------------------------------------------------------------
    @abstractmethod
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        """Lease up to `max_messages` visible messages, waiting up to `wait` s for one.

        Each gets a fresh token and fencing number and `attempt + 1`. A message whose
        attempts are exhausted is dead-lettered instead of leased. `visibility_timeout`
        applies to messages enqueued without one of their own.
        """

    def lease_soon(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    ) -> Callable[[], list[Delivery]]:
        """Start a `lease` without waiting for it; the returned callable finishes it.

        A busy worker asks for its next batch before it runs the current one, so a network
        backend works on the request while the worker works on jobs. Backends whose lease
        is not a network round trip keep this default, which leases when the callable is
        called: holding leases early would gain them nothing. The callable must be called
        exactly once (it raises what `lease` would); a lease started and never finished
        leaves its messages leased until their visibility timeout.
        """
        return lambda: self.lease(queue, max_messages, visibility_timeout)

    @abstractmethod
    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        """Delete the messages; False (and no change) where the token is stale."""

    @abstractmethod
    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        """Push lease expiry to now + `visibility_timeout`; False where the token is stale."""

    @abstractmethod
    def release(self, releases: Sequence[Release]) -> list[bool]:
        """Make messages visible again after `delay`; without penalty the attempt is returned."""

    @abstractmethod
    def bury(self, burials: Sequence[Bury]) -> list[bool]:
        """Move messages to the dead-letter queue with their reason and last error."""

    # -- operating -------------------------------------------------------------------
    @abstractmethod
    def stats(self, queue: str) -> QueueStats: ...

    @abstractmethod
    def queues(self) -> list[str]:
        """Names of queues that hold at least one message (any state)."""

    @abstractmethod
    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        """Dead letters, most recent first."""

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        """One dead letter by id; backends with an index on it override this scan."""
        offset, page_size = 0, 500
        while True:
            page = self.dead_letters(queue, limit=page_size, offset=offset)
            for letter in page:
                if letter.id == id:
                    return letter
            if len(page) < page_size:
                return None
            offset += page_size

    @abstractmethod
    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        """Dead letters back to ready with attempts reset; all of them when `ids` is None."""

    @abstractmethod
    def purge_dead(self, queue: str) -> int:
        """Remove the queue's dead letters only."""

    @abstractmethod
    def purge(self, queue: str) -> int:
        """Remove every message of the queue, in any state, and its waiting messages' locks."""

    @property
    @abstractmethod
    def locks(self) -> LockStore:
        """The lock service that lives beside this backend's messages."""

    def ping(self) -> None:  # noqa: B027 - optional hook with a sane default
        """Raise BackendUnavailable if the backend cannot be reached."""

    def close(self) -> None:  # noqa: B027 - optional hook with a sane default
        """Release connections; the backend must not be used afterwards."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
