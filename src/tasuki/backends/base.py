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

from tasuki.core.locks import LockStore
from tasuki.core.message import DeadLetter
from tasuki.core.records import (
    DEFAULT_VISIBILITY_TIMEOUT,
    FOREVER,
    Bury,
    Capabilities,
    Delivery,
    Enqueued,
    EnqueueStatus,
    Envelope,
    HistoryEntry,
    LockHolder,
    MessageInfo,
    QueueStats,
    Receipt,
    Release,
    SettledTotals,
    UniqueClaim,
)
from tasuki.core.reliability import Reliability
from tasuki.errors import InvalidArgument

__all__ = [
    "DEFAULT_VISIBILITY_TIMEOUT",
    "FOREVER",
    "Backend",
    "Bury",
    "Capabilities",
    "Delivery",
    "EnqueueStatus",
    "Enqueued",
    "Envelope",
    "HistoryEntry",
    "LockHolder",
    "LockStore",
    "MessageInfo",
    "QueueStats",
    "Receipt",
    "Release",
    "Reliability",
    "SettledTotals",
    "UniqueClaim",
]


def refuse_connection(backend: Backend, connection: object | None) -> None:
    """Raise if a caller's connection is given to a backend that cannot join it."""
    if connection is not None:
        scheme = backend.url.split("://", 1)[0]
        raise InvalidArgument(
            f"{scheme}:// cannot enqueue inside your database transaction "
            "(it lacks the transactional_enqueue capability); drop connection= "
            "or use a sqlite:// or postgresql:// backend"
        )


class Backend(ABC):
    """A message store that enforces the tasuki lifecycle. See the module docstring."""

    url: str
    capabilities: Capabilities

    # -- producing -------------------------------------------------------------------
    @abstractmethod
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        """Store messages; ids already known make no change (idempotent enqueue).

        `connection`: the caller's own database connection, inside whose open
        transaction the messages are written (rolled back: they never existed). Only
        backends with the `transactional_enqueue` capability take one; the others
        refuse it with `refuse_connection`.
        """

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

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        """Messages whose lease is current, soonest expiry first (state "in_flight", no
        history): what the workers hold now. A backend without `inspection` raises."""
        scheme = self.url.split("://", 1)[0]
        raise InvalidArgument(
            f"{scheme}:// cannot list messages in flight (it lacks the inspection capability)"
        )

    def settled_totals(self, queue: str) -> SettledTotals | None:
        """Messages acked and dead-lettered so far (rates are their differences over
        time); None where the backend does not count them."""
        return None

    def reliability(self, queue: str) -> Reliability | None:
        """The queue's reliability counts (`tasuki.core.reliability`); None where the
        backend does not keep them (`reliability_counts=False`)."""
        return None

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:  # noqa: B027
        """Add to the queue's reliability meters (what only a worker measures: the
        heartbeat lag). A backend without `reliability_counts` ignores them."""

    def inspect(self, queue: str, id: str) -> MessageInfo:
        """One message's state, attempts, lease and the ends of its last few leases.

        A backend that cannot tell declares `inspection=False` and keeps this default.
        """
        scheme = self.url.split("://", 1)[0]
        raise InvalidArgument(
            f"{scheme}:// cannot inspect a message (it lacks the inspection capability)"
        )

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
