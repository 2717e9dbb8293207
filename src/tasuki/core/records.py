"""The values that cross the backend seam: what goes in, what comes out, what settles.

They live in the core, below the backends, so that the runtime, the middleware and every
backend speak of the same things without importing one another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, NamedTuple

from tasuki.core.message import ErrorInfo, Lease, Message

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
    # `inspect` tells one message's state and the history of its last leases, and
    # `in_flight` lists the current leases.
    inspection: bool = True
    # `settled_totals` counts acked and dead messages per queue (the dashboard's rates).
    settled_counts: bool = True
    # `reliability` counts redeliveries, lost leases, expiry-to-start times and the
    # heartbeat lag workers report with `add_meters` (`tasuki.core.reliability`).
    reliability_counts: bool = True
    # The GIL slice (`sys.setswitchinterval`, seconds) a `tasuki worker` process takes
    # while fast jobs run inline, or None for CPython's 5 ms. The fetcher holds the GIL
    # while it runs a batch of jobs; a client library that gives the GIL up and takes
    # it back several times per call (psycopg reading a lease's rows) waits up to a
    # slice each time, and the next batch arrives late.
    gil_slice: float | None = None


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
    # The error that made the run retry, as `Type: message` (for the message's history).
    error: str = ""


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


MessageState = Literal["delayed", "ready", "in_flight", "dead", "finished", "unknown"]
HistoryEvent = Literal["acked", "retried", "released", "dead", "lease lost"]
# Entries of history a backend keeps per message: the most recent ends of its leases.
HISTORY_LIMIT = 5


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """How one lease of a message ended.

    `event`: "acked", "retried" (released with penalty: the run failed and will run again
    after `detail`'s delay), "released" (given back without penalty: shutdown, deferral),
    "dead" (buried; `detail` is the reason and the error) or "lease lost" (the lease
    expired and the message was leased again, or dead-lettered; `at` is then when it
    expired). `fencing_token` is the fencing number of the lease that ended.
    """

    at: float
    event: HistoryEvent
    fencing_token: int
    detail: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "at": self.at,
            "event": self.event,
            "fencing_token": self.fencing_token,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class MessageInfo:
    """What a backend knows of one message: `app.inspect(queue, id)`.

    `state` is "finished" when the message was acked and its caller-given id is still
    remembered (the idempotency window, until `finished_until`), "unknown" when the
    backend has no trace of it. `visible_at` is when a waiting message becomes ready;
    `lease_expires_at` when the current lease of one in flight expires. `history` holds
    the ends of its last few leases (at most `HISTORY_LIMIT`), oldest first. Times are
    epoch seconds of the backend's clock.
    """

    queue: str
    id: str
    state: MessageState
    attempt: int = 0
    max_attempts: int | None = None
    fencing_token: int = 0
    enqueued_at: float | None = None
    visible_at: float | None = None
    lease_expires_at: float | None = None
    finished_until: float | None = None
    reason: str = ""
    error: ErrorInfo | None = None
    died_at: float | None = None
    history: tuple[HistoryEntry, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "queue": self.queue,
            "id": self.id,
            "state": self.state,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "fencing_token": self.fencing_token,
            "enqueued_at": self.enqueued_at,
            "visible_at": self.visible_at,
            "lease_expires_at": self.lease_expires_at,
            "finished_until": self.finished_until,
            "reason": self.reason,
            "error": None
            if self.error is None
            else {
                "type": self.error.type,
                "message": self.error.message,
                "traceback": self.error.traceback,
            },
            "died_at": self.died_at,
            "history": [entry.as_dict() for entry in self.history],
        }


def waiting_state(visible_at: float, now: float) -> MessageState:
    return "ready" if visible_at <= now else "delayed"


def error_summary(error: ErrorInfo | None) -> str:
    """`Type: message` of an error, cut to a line a history entry can hold."""
    return "" if error is None else _cut(str(error))


def death_detail(reason: str, error: ErrorInfo | None) -> str:
    """The detail of a "dead" history entry: the reason, then the error's summary."""
    return ": ".join(part for part in (reason, error_summary(error)) if part)


def release_event(delay: float, penalty: bool, error: str = "") -> tuple[HistoryEvent, str]:
    """The history entry of a release: a retry (with its delay and error) or a hand-back."""
    again = f"again in {delay:g}s"
    if penalty:
        return "retried", f"{again}: {_cut(error)}" if error else again
    return "released", again


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SettledTotals(NamedTuple):
    """Messages of a queue acked and dead-lettered since its store began (for rates)."""

    acked: int
    dead: int


@dataclass(frozen=True, slots=True)
class LockHolder:
    owner: str
    expires_in: float
