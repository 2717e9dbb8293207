"""The values that cross the backend seam: what goes in, what comes out, what settles.

They live in the core, below the backends, so that the runtime, the middleware and every
backend speak of the same things without importing one another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from tasuki.core.envelope import (
    Enqueued,
    EnqueueStatus,
    Envelope,
    Limit,
    LimitKind,
    UniqueClaim,
)
from tasuki.core.message import ErrorInfo, Lease, Message, MessageState
from tasuki.core.text import storable

if TYPE_CHECKING:
    from tasuki.core.flowrecords import Effects

# Made where a message is made (`core/envelope.py`, `core/message.py`), named here too:
# the values that cross the backend seam are imported from this module.
__all__ = [
    "EnqueueStatus",
    "Enqueued",
    "Envelope",
    "Limit",
    "LimitKind",
    "MessageState",
    "UniqueClaim",
]

DEFAULT_VISIBILITY_TIMEOUT = 30.0
FOREVER = 10 * 365 * 86400.0


# -- durable steps (`core/steps.py` runs them) ------------------------------
class StepRecord(NamedTuple):
    """One recorded step: its name, occurrence (from 1), JSON result, when it started
    (epoch seconds) and how long it ran (seconds)."""

    name: str
    occurrence: int
    result: bytes
    started_at: float
    duration: float

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "occurrence": self.occurrence,
            "started_at": self.started_at,
            "duration": self.duration,
            "result": preview(self.result),
        }


class Wait(NamedTuple):
    """What a suspended run waits for (`Settle.suspend`): its wake-up time only
    (`signal` empty: a sleep), or a signal of that name, at most until the wake-up."""

    signal: str = ""


class Waiting(NamedTuple):
    """What a message waits for now, as the backend keeps it: a signal ("" for a sleep)
    and when it wakes (epoch seconds)."""

    signal: str
    until: float


class Taken(NamedTuple):
    """What `take_signal` found: whether the lease is still the caller's, and the
    payload of the signal it consumed (None: no such signal is stored)."""

    held: bool
    payload: bytes | None


def preview(result: bytes, limit: int = 80) -> str:
    """The start of a step's JSON result, for `inspect` and the dashboard."""
    text = result.decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Receipt(NamedTuple):
    """What settles a delivery: the message and the token of the lease being settled."""

    queue: str
    id: str
    token: str


# How a delivery ends: deleted ("ack"), handed back to wait again ("release"), or moved to
# the dead letters ("dead"). One word per verdict, the same in the runtime, the backends
# and the logs ("dead-lettered" is the log line's past tense of "dead").
Verdict = Literal["ack", "release", "dead"]


class Settle(NamedTuple):
    """How one delivery ends, as the worker tells the backend.

    A worker sends its settles in batches (`Backend.settle`), whatever their verdicts:
    only the holder of the current lease (`receipt.token`) can settle a message. The
    fields after `verdict` belong to one verdict each: a release waits `delay` seconds,
    and without `penalty` gives its attempt back; `error` is the error that made a run
    retry (a release) or the last error of a dead letter; `reason` says why it died.
    """

    receipt: Receipt
    verdict: Verdict
    delay: float = 0.0
    penalty: bool = True
    reason: str = ""
    error: ErrorInfo | None = None
    # What must change with this settle, in the same atomic step and under the same
    # token check (results, workflows: `core/flowrecords.py`); ack and dead only.
    effects: Effects | None = None
    # A release that suspends a durable run (`suspend`): what the message waits for.
    wait: Wait | None = None

    @classmethod
    def ack(cls, receipt: Receipt, effects: Effects | None = None) -> Settle:
        return cls(receipt, "ack", 0.0, True, "", None, effects)

    @classmethod
    def release(
        cls,
        receipt: Receipt,
        delay: float = 0.0,
        penalty: bool = True,
        error: ErrorInfo | None = None,
    ) -> Settle:
        return cls(receipt, "release", delay, penalty, "", error)

    @classmethod
    def suspend(cls, receipt: Receipt, delay: float, wait: Wait) -> Settle:
        """A durable run ends at a sleep or a wait for a signal: released without penalty
        until `delay` from now (the attempt given back), waiting for `wait`; a signal it
        waits for, stored already or sent later, makes it ready at once."""
        return cls(receipt, "release", delay, False, "", None, None, wait)

    @classmethod
    def dead(
        cls,
        receipt: Receipt,
        reason: str,
        error: ErrorInfo | None = None,
        effects: Effects | None = None,
    ) -> Settle:
        return cls(receipt, "dead", 0.0, True, storable(reason), error, effects)


class Progress(NamedTuple):
    """How far a running job says it is: `fraction` in [0, 1] and a short text."""

    fraction: float
    text: str = ""


class Keep(NamedTuple):
    """One lease to keep alive (`Backend.keep`): extended to now + `visibility_timeout`,
    with the job's latest progress, stored only while the lease is current."""

    receipt: Receipt
    visibility_timeout: float
    progress: Progress | None = None


# What `keep` found: the lease is still the caller's ("held"), it lapsed or was taken by
# another lease ("lost"), or the message was cancelled while it ran ("cancelled").
LeaseStatus = Literal["held", "lost", "cancelled"]
# What `cancel` did: removed a waiting message, signalled a running one, or found
# nothing it could cancel (unknown, finished, dead, or cancelled already).
CancelStatus = Literal["removed", "signalled", "unknown"]
# How long a cancelled message's id stays known (an enqueue of it is a no-op, `inspect`
# says "cancelled"), when it had no longer id window of its own.
CANCELLED_WINDOW = 3600.0


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


HistoryEvent = Literal["acked", "retried", "released", "dead", "lease lost"]
# Entries of history a backend keeps per message: the most recent ends of its leases.
HISTORY_LIMIT = 5


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """How one lease of a message ended.

    `event`: "acked", "retried" (released with penalty: the run failed and will run again
    after `detail`'s delay), "released" (given back without penalty: shutdown, deferral),
    "dead" (dead-lettered; `detail` is the reason and the error) or "lease lost" (the lease
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
    remembered (the idempotency window, until `finished_until`), "cancelled" when it was
    cancelled (for the same window), "unknown" when the backend has no trace of it.
    `visible_at` is when a waiting message becomes ready; `lease_expires_at` when the
    current lease of one in flight expires. `history` holds the ends of its last few
    leases (at most `HISTORY_LIMIT`), oldest first. `progress` is what the running job
    last reported. `flow_id` and `step` name the workflow a step message belongs to.
    Times are epoch seconds of the backend's clock.
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
    # What the running job last said of its progress (backends with `progress`).
    progress: Progress | None = None
    priority: int = 0
    # The workflow this message is a step of, and its place in it (`app.inspect` finds
    # them in the flow's record; a backend's own inspect leaves them None).
    flow_id: str | None = None
    step: str | None = None
    # The job it runs and its arguments, decoded with the app's serializer by the
    # console's listings (`app.messages`); None where not decoded (not listed, or a body
    # the console will not decode: pickle that is not signed and verified).
    job: str | None = None
    args: tuple[Any, ...] | None = None
    kwargs: dict[str, Any] | None = None
    # Durable steps (`core/steps.py`): the message's step records, oldest first, and what
    # it waits for ("sleeping until T", "waiting for signal 'x' until T"; "" for nothing).
    steps: tuple[StepRecord, ...] = ()
    waiting: str = ""

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
            "progress": None
            if self.progress is None
            else {"fraction": self.progress.fraction, "text": self.progress.text},
            "priority": self.priority,
            "flow": None if self.flow_id is None else {"id": self.flow_id, "step": self.step},
            "job": self.job,
            "args": None if self.args is None else list(self.args),
            "kwargs": self.kwargs,
            "steps": [record.as_dict() for record in self.steps],
            "waiting": self.waiting,
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
