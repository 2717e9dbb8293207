"""The seam every backend plugs into.

A backend stores messages and enforces their lifecycle *itself*, atomically: lease
tokens, attempts, expiry, dead-lettering of exhausted messages (the states and rules:
docs/concepts.md). Nothing above this interface does read-modify-write on backend state,
which is what lets several worker processes on several machines share a queue safely.

Every settling operation takes a batch, because the round trip, not the work, is what a
network backend pays for. Backends that can't do a batch in one trip loop internally.
Times passed in are *relative* (seconds from now, measured by the backend's clock), so
producers and workers on machines with skewed clocks still agree.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from tasuki.core.capabilities import ANOTHER_BACKEND, Capabilities, refusal
from tasuki.core.console import BrowseState, JobStats, JobTally, Listed, Page, WorkerInfo
from tasuki.core.flowrecords import Effects, Fill, FlowFailure, FlowRecord, FlowStep, ResultRecord
from tasuki.core.locks import LockStore
from tasuki.core.message import DeadLetter
from tasuki.core.records import (
    DEFAULT_VISIBILITY_TIMEOUT,
    FOREVER,
    CancelStatus,
    Delivery,
    Enqueued,
    EnqueueStatus,
    Envelope,
    HistoryEntry,
    Keep,
    LeaseStatus,
    Limit,
    LockHolder,
    MessageInfo,
    Progress,
    QueueStats,
    Receipt,
    Settle,
    SettledTotals,
    StepRecord,
    Taken,
    UniqueClaim,
    Verdict,
    Wait,
    Waiting,
)
from tasuki.core.reliability import Reliability
from tasuki.errors import Unsupported

T = TypeVar("T")
# What `signal` did: stored it for a message that exists ("delivered"), or found none.
SignalStatus = Literal["delivered", "unknown"]

__all__ = [
    "DEFAULT_VISIBILITY_TIMEOUT",
    "FOREVER",
    "Backend",
    "CancelStatus",
    "Capabilities",
    "Delivery",
    "Effects",
    "EnqueueStatus",
    "Enqueued",
    "Envelope",
    "Fill",
    "FlowFailure",
    "FlowRecord",
    "FlowStep",
    "HistoryEntry",
    "Keep",
    "LeaseStatus",
    "Limit",
    "LockHolder",
    "LockStore",
    "MaintenanceService",
    "MessageInfo",
    "Progress",
    "QueueStats",
    "Receipt",
    "Reliability",
    "ResultRecord",
    "Settle",
    "SettledTotals",
    "SignalStatus",
    "StepRecord",
    "Taken",
    "UniqueClaim",
    "Verdict",
    "Wait",
    "Waiting",
]


# How a default `wait_result` / `wait_flow` polls: from 10 ms, doubling, to 1 s.
POLL_FIRST, POLL_MOST = 0.01, 1.0


class MaintenanceService(ABC):
    """A chore a backend's store needs now and then, kept off the enqueue and settle paths
    (forgetting expired ids and locks, pruning an archive).

    Workers run them on a thread of their own (`tasuki.runtime.maintenance`), each round
    under a lock named after the service and held for `interval` seconds, so that
    however many workers share the store, one of them runs it once per interval.
    """

    # Unique among the backend's services: the lock's name.
    name: str
    # Seconds between two rounds.
    interval: float

    @abstractmethod
    def run(self) -> bool:
        """One round, in short transactions; True when work was left for another round
        soon (a batch limit was reached)."""


class Backend(ABC):
    """A message store that enforces the tasuki lifecycle. See the module docstring."""

    url: str
    capabilities: Capabilities
    # Seconds of waiting that count as one priority level (`Envelope.priority`): the
    # lease ranks due messages by visible_at - priority x priority_aging. The App sets it.
    priority_aging: float = 300.0
    # The GIL slice (`sys.setswitchinterval`, seconds) a `tasuki worker` process takes
    # while fast jobs run inline, or None for CPython's 5 ms: a worker tuning, not a
    # capability. The fetcher holds the GIL while it runs a batch of jobs; a client
    # library that gives the GIL up and takes it back several times per call (psycopg
    # reading a lease's rows) waits up to a slice each time, and the next batch is late.
    gil_slice: float | None = None

    # -- refusing --------------------------------------------------------------------
    @property
    def scheme(self) -> str:
        """The URL's scheme ("redis", "sqs", ...), as every refusal names the backend.

        A backend's URL was checked when it was opened (`urls.scheme_of`), so this only
        cuts it; the seam imports nothing of `urls`, which imports the seam."""
        return self.url.partition("://")[0].lower()

    def refusal(self, capability: str, what: str, advice: str = ANOTHER_BACKEND) -> Unsupported:
        """The error for `what`, which this backend cannot do (`core/capabilities.py`)."""
        return refusal(self.scheme, capability, what, advice)

    def require(self, capability: str, what: str, advice: str = ANOTHER_BACKEND) -> None:
        """Raise `refusal(...)` unless this backend has `capability`."""
        if not getattr(self.capabilities, capability):
            raise self.refusal(capability, what, advice)

    def refuse_connection(self, connection: object | None) -> None:
        """Raise if a caller's connection is given to a backend that cannot join it."""
        if connection is not None:
            raise self.refusal(
                "transactional_enqueue",
                "enqueue inside your database transaction",
                "drop connection= or use a sqlite:// or postgresql:// backend",
            )

    # -- producing -------------------------------------------------------------------
    @abstractmethod
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        """Store messages; ids already known make no change (idempotent enqueue).

        `connection`: the caller's own database connection, inside whose open
        transaction the messages are written (rolled back: they never existed). Only
        backends with the `transactional_enqueue` capability take one; the others
        refuse it with `Backend.refuse_connection`.
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
    def settle(self, items: Sequence[Settle]) -> list[bool]:
        """End deliveries, each by its verdict: ack deletes the message, release makes it
        visible again after `delay` (without penalty the attempt is given back), dead
        moves it to the dead-letter queue with its reason and last error.

        One call for a batch of any mix of verdicts, one result per item: False (and no
        change) where the token is not the message's current lease. A receipt repeated in
        one call settles the message once; its later copies are refused.
        """

    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        """`settle` with every receipt acked."""
        return self.settle([Settle.ack(r) for r in receipts])

    @abstractmethod
    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        """Push lease expiry to now + `visibility_timeout`; False where the token is stale."""

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        """Keep leases alive, each with its job's latest progress: "held" if the lease is
        still the caller's (extended, progress stored), "lost" if it lapsed or another
        lease holds the message, "cancelled" if the message was cancelled while it ran.

        This default extends and never answers "cancelled" nor stores progress: backends
        with the `cancel` or `progress` capability override it.
        """
        by_vt: dict[float, list[int]] = {}
        for n, item in enumerate(items):
            by_vt.setdefault(item.visibility_timeout, []).append(n)
        out: list[LeaseStatus] = ["lost"] * len(items)
        for vt, positions in by_vt.items():
            held = self.extend([items[n].receipt for n in positions], vt)
            for n, ok in zip(positions, held, strict=True):
                out[n] = "held" if ok else "lost"
        return out

    def cancel(self, queue: str, id: str) -> CancelStatus:
        """Cancel a message: "removed" (it was waiting: gone, `inspect` says cancelled),
        "signalled" (in flight: its lease is fenced out, `keep` answers "cancelled", it is
        never leased again), "unknown" (nothing to cancel)."""
        raise self.refusal("cancel", "cancel a message")

    # -- results and workflows (`core/flowrecords.py`) ------------------------------------
    def result(self, queue: str, id: str) -> ResultRecord | None:
        """The message's result record, or None (unknown id, result not kept, expired)."""
        raise self.refusal("results", "keep results")

    def wait_result(self, queue: str, id: str, timeout: float) -> ResultRecord | None:
        """`result`, once it is no longer pending or `timeout` passed. This default polls
        (10 ms doubling to 1 s); backends with a notification override it."""
        return _poll(lambda: self.result(queue, id), lambda r: r.state != "pending", timeout)

    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        """Store a flow's record and enqueue its first steps, atomically where the engine
        can; False (and nothing enqueued) if a flow with that id exists."""
        raise self.refusal("workflows", "run workflows")

    def flow(self, flow_id: str) -> FlowRecord | None:
        raise self.refusal("workflows", "run workflows")

    def wait_flow(self, flow_id: str, timeout: float) -> FlowRecord | None:
        """`flow`, once it has a result, a failure or is cancelled, or `timeout` passed."""
        return _poll(
            lambda: self.flow(flow_id),
            lambda f: f.result is not None or f.failure is not None or f.cancelled,
            timeout,
        )

    def cancel_flow(self, flow_id: str) -> bool:
        """Set the flow's cancelled flag (settles of its steps then enqueue nothing);
        False if the flow is unknown. The runtime cancels its steps."""
        raise self.refusal("workflows", "run workflows")

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        """A complete barrier's value (the JSON array of its slots), or None."""
        raise self.refusal("workflows", "run workflows")

    def flow_steps(self, steps: Sequence[FlowStep]) -> list[MessageInfo]:
        """What `app.flow` shows of each step: `inspect` of it. A backend that cannot
        inspect says what its flow records know (SQS: state and leases counted)."""
        return [self.inspect(s.queue, s.message_id) for s in steps]

    # -- durable steps (DESIGN §4c, `core/steps.py`) ------------------------------------
    # A backend with `durable_steps` keeps, beside each message and dropped with it (ack
    # and its result's time, purge, dead-letter purge, cancel): its step records, the
    # signals sent to it and not yet consumed, and what it waits for. A suspended run is
    # settled by `settle` with `Settle.suspend`: a release without penalty that also
    # stores `Waiting(wait.signal, now + delay)`, and, in the same atomic step, makes the
    # message ready at once if a signal of that name is stored already. Any other settle
    # of the message ends the wait. Redrive keeps the records (a redriven message
    # replays them).
    def steps(self, queue: str, id: str) -> list[StepRecord]:
        """The message's step records (consumed signals included), oldest first; empty
        for an unknown message. One read per run, at its first durable call."""
        raise self.refusal("durable_steps", "record durable steps")

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        """Store one step record, atomically with the check that `receipt.token` is the
        message's current lease: False (and nothing stored) if it is not (a zombie's)."""
        raise self.refusal("durable_steps", "record durable steps")

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        """Consume the oldest stored signal `name` of the message, atomically with the
        lease check and with recording it as the step `tasuki:signal:<name>` of that
        occurrence (its result: the payload): a signal is consumed once. `Taken(False,
        None)` if the lease is stale (nothing changed), `Taken(True, None)` if no such
        signal is stored."""
        raise self.refusal("durable_steps", "wait for signals")

    def signal(self, queue: str, id: str, name: str, payload: bytes) -> SignalStatus:
        """Store a signal (`payload`: JSON) for a message waiting, delayed or in flight:
        "delivered"; if the message waits for `name` (`Waiting.signal`), it becomes
        ready at once, in the same atomic step, and its wait ends. "unknown" (nothing
        stored) for a message the backend does not hold, or holds dead."""
        raise self.refusal("durable_steps", "signal a message")

    def waiting(self, queue: str, id: str) -> Waiting | None:
        """What a waiting message waits for (a sleep or a signal, until when); None if it
        is not suspended, or no longer (its wait ended, it is leased, or it is ready)."""
        return None

    def record_step_in_transaction(
        self, receipt: Receipt, work: Callable[[Any], StepRecord]
    ) -> StepRecord | None:
        """`transactional_steps`: in one transaction of the backend's database, check
        that `receipt.token` is the current lease (and hold it so until the commit),
        call `work(connection)` (the step's own writes happen on that connection), store
        the record it returns, commit. None, and everything rolled back, if the lease is
        stale before or after `work`; `work`'s error rolls back and propagates."""
        raise self.refusal("transactional_steps", "run a step inside its transaction")

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
        raise self.refusal("inspection", "list messages in flight")

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
        raise self.refusal("inspection", "inspect a message")

    def inspect_body(
        self, queue: str, id: str
    ) -> tuple[MessageInfo, bytes | None, Mapping[str, str]]:
        """`inspect`, with the stored body and headers read in the same query (None and
        {} when the message is not stored, or the backend does not read them back): the
        console decodes its job and arguments with the app's serializer. By default,
        `inspect` alone."""
        return self.inspect(queue, id), None, {}

    @abstractmethod
    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        """Dead letters back to ready with attempts reset; all of them when `ids` is None."""

    @abstractmethod
    def purge_dead(self, queue: str) -> int:
        """Remove the queue's dead letters only."""

    @abstractmethod
    def purge(self, queue: str) -> int:
        """Remove every message of the queue, in any state, and its waiting messages' locks."""

    # -- the console (`core/console.py`, DESIGN §4d) --------------------------------------
    def pause(self, queue: str) -> None:
        """Hold the queue: kept in the backend, read by every worker (`paused`) at least
        once a second, which then leases nothing from it. Enqueue, delays coming due,
        cancel, inspect and browse go on as before."""
        raise self.refusal("pause", "pause a queue")

    def resume(self, queue: str) -> None:
        raise self.refusal("pause", "pause a queue")

    def paused(self) -> set[str]:
        """The queues paused now: one cheap read, polled by every worker."""
        raise self.refusal("pause", "pause a queue")

    def browse(
        self,
        queue: str,
        state: BrowseState,
        *,
        job: str | None = None,
        newest_first: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Listed]:
        """A page of the queue's messages in `state`, of `job` only if given, ordered by
        the state's time (ready and delayed: when they become ready; in flight: when the
        lease expires; dead: when they died), then enqueue order; oldest first unless
        `newest_first`. `cursor` (a `Position`'s text) continues a listing.

        An index per listing (with and without `job`), never a scan; it changes nothing.
        Without `browse_waiting`, "ready" and "delayed" are refused.
        """
        raise self.refusal("browsing", "list a queue's messages")

    def browse_matching(
        self,
        queue: str,
        state: BrowseState,
        match: Mapping[str, Any],
        *,
        job: str | None = None,
        newest_first: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Listed] | None:
        """`browse`, leaving out messages whose arguments do not equal `match` (see
        `app.messages`), filtered by the backend as it walks the listing: at most a
        bounded number of messages per call, so a page may hold fewer than `limit`, even
        none, with a cursor to go on from. A prefilter: the caller checks each item again
        by its own rules. None where the backend does not filter (the caller filters the
        pages it reads)."""
        return None

    def retry_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        """Make each message ready now, but only if it is still in `state` ("delayed":
        its delay or backoff is cut short, attempts kept; "dead": re-driven, attempts
        reset): True for each one changed. Each item's check and change are atomic, so a
        message that changed state since it was listed is never touched."""
        raise self.refusal("browse_waiting", "retry a waiting message now")

    def retry_now(self, queue: str, id: str) -> bool:
        """A delayed (or retry-scheduled) message: ready now; False if no longer delayed."""
        return self.retry_many(queue, [id], "delayed") == [True]

    def cancel_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        """`cancel` each message only if it is still in `state` (atomic per item, like
        `retry_many`); a dead one is removed from the dead letters. True for each one
        cancelled."""
        raise self.refusal("browsing", "cancel listed messages")

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally] = ()) -> bool:
        """Store the worker's announce (replacing its last, `seen_at` by the backend's
        clock) and add its job tallies to the per-minute rollups (`job_stats`: each
        count added atomically, whatever other workers add at once). True if a stop was
        asked of this worker (`stop_worker`)."""
        raise self.refusal("worker_registry", "keep a registry of workers")

    def workers(self) -> list[WorkerInfo]:
        """The workers announced within `WORKER_KEPT`, by id; those not seen for three
        heartbeats are marked `gone`."""
        raise self.refusal("worker_registry", "keep a registry of workers")

    def stop_worker(self, id: str) -> bool:
        """Ask the worker to drain and exit (it reads this with its next announce); False
        if no such worker is known."""
        raise self.refusal("worker_registry", "keep a registry of workers")

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        """Each job's stats on the queue over the last `window` seconds, from the
        per-minute rollups (whole minutes: the current one and those that started within
        the window)."""
        raise self.refusal("job_stats", "keep per-job stats")

    @property
    @abstractmethod
    def locks(self) -> LockStore:
        """The lock service that lives beside this backend's messages."""

    def maintenance(self) -> Sequence[MaintenanceService]:
        """The chores this backend's store needs, for the workers to run; none by default
        (a store that expires its own keys, like Redis, needs none)."""
        return ()

    def ping(self) -> None:  # noqa: B027 - optional hook with a sane default
        """Raise BackendUnavailable if the backend cannot be reached."""

    def close(self) -> None:  # noqa: B027 - optional hook with a sane default
        """Release connections; the backend must not be used afterwards."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _poll(read: Callable[[], T | None], done: Callable[[T], bool], timeout: float) -> T | None:
    deadline = time.monotonic() + timeout
    pause = POLL_FIRST
    while True:
        found = read()
        remaining = deadline - time.monotonic()
        if found is None or done(found) or remaining <= 0:
            return found
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, POLL_MOST)
