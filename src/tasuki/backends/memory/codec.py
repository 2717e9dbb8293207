"""A message as the memory backend stores it (`Record`), and the one mapping between
that and the records of the backend seam: an `Envelope` in, a `Delivery`, a `DeadLetter`
or a `MessageInfo` out. Nothing is copied or encoded on the way in: the envelope is
kept as it came (it is an immutable named tuple), with the lifecycle's fields beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasuki.core.message import DeadLetter, ErrorInfo
from tasuki.core.reasons import describe
from tasuki.core.records import (
    HISTORY_LIMIT,
    Delivery,
    Envelope,
    HistoryEntry,
    HistoryEvent,
    MessageInfo,
    MessageState,
    Progress,
    StepRecord,
    Waiting,
    waiting_state,
)

# Where a record is in its lifecycle (a dead record stays in its queue's records).
WAITING, IN_FLIGHT, DEAD = 0, 1, 2


@dataclass(slots=True)
class Record:
    """One message in the store: its envelope and its lifecycle so far.

    `visible_at` is when it becomes ready (waiting) or when its lease expires (in
    flight); `stamp` tells a current entry of the queue's heaps from a superseded one.
    """

    envelope: Envelope
    seq: int
    enqueued_at: float
    visible_at: float
    state: int = WAITING
    attempt: int = 0
    fence: int = 0
    token: str | None = None
    stamp: int = 0
    reason: str = ""
    error: ErrorInfo | None = None
    died_at: float = 0.0
    history: tuple[HistoryEntry, ...] = ()
    # Waiting for a limit (not counted as ready; see `limits.py`).
    parked: bool = False
    progress: Progress | None = None
    # Durable steps (`durable.py`): made on first use, dropped with the record.
    steps: list[StepRecord] | None = None
    signals: list[tuple[str, bytes]] | None = None
    waiting: Waiting | None = None

    def remember(self, now: float, event: HistoryEvent, detail: str = "") -> None:
        entry = HistoryEntry(now, event, self.fence, detail)
        self.history = (*self.history[-(HISTORY_LIMIT - 1) :], entry)


def stored(env: Envelope, seq: int, now: float) -> Record:
    """A new message, waiting until now + its delay."""
    return Record(env, seq, now, now + env.delay)


def with_payload(record: Record, new: Envelope) -> None:
    """A waiting message takes another's body and headers (`Unique(replace=True)`)."""
    record.envelope = record.envelope._replace(body=new.body, headers=new.headers)


def delivery(record: Record, visibility_timeout: float) -> Delivery:
    env = record.envelope
    assert record.token is not None
    return Delivery(
        queue=env.queue,
        id=env.id,
        body=env.body,
        headers=dict(env.headers),
        attempt=record.attempt,
        max_attempts=env.max_attempts,
        enqueued_at=record.enqueued_at,
        token=record.token,
        fencing_token=record.fence,
        visibility_timeout=visibility_timeout,
    )


def dead_letter(record: Record) -> DeadLetter:
    env = record.envelope
    return DeadLetter(
        id=env.id,
        queue=env.queue,
        body=env.body,
        headers=dict(env.headers),
        attempt=record.attempt,
        reason=describe(record.reason, record.attempt, env.max_attempts),
        error=record.error,
        died_at=record.died_at,
        enqueued_at=record.enqueued_at,
    )


def message_info(record: Record, now: float) -> MessageInfo:
    """What `inspect` tells of a stored message (and `in_flight` of a leased one)."""
    env = record.envelope
    state: MessageState
    visible_at = lease_expires_at = None
    if record.state == DEAD:
        state = "dead"
    elif record.state == IN_FLIGHT and record.visible_at > now:
        state, lease_expires_at = "in_flight", record.visible_at
    else:
        state, visible_at = waiting_state(record.visible_at, now), record.visible_at
    return MessageInfo(
        env.queue,
        env.id,
        state,
        attempt=record.attempt,
        max_attempts=env.max_attempts,
        fencing_token=record.fence,
        enqueued_at=record.enqueued_at,
        visible_at=visible_at,
        lease_expires_at=lease_expires_at,
        reason=describe(record.reason, record.attempt, env.max_attempts),
        error=record.error,
        died_at=record.died_at if state == "dead" else None,
        history=record.history,
        progress=record.progress if state == "in_flight" else None,
        priority=env.priority,
    )


def lease_info(record: Record) -> MessageInfo:
    """What `in_flight` tells of a leased message: its lease, no history."""
    env = record.envelope
    return MessageInfo(
        env.queue,
        env.id,
        "in_flight",
        attempt=record.attempt,
        max_attempts=env.max_attempts,
        fencing_token=record.fence,
        enqueued_at=record.enqueued_at,
        lease_expires_at=record.visible_at,
        progress=record.progress,
        priority=env.priority,
    )
