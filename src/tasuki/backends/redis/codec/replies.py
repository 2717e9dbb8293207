"""In: the Redis scripts' replies as tasuki's records. Each script that returns records
declares their fields in its header, `--- @reply NAME: field field ...`, and each record
is read here by a reader whose positional parameters are those fields, by name, in that
order (`tests/backends/redis/test_redis_codec.py` holds the two together): a `leased`
record becomes a `Delivery`, a `dead_letter` a `DeadLetter`, `in_flight` and `message`
records a `MessageInfo`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import starmap
from typing import Any, TypeVar

import orjson

from tasuki.backends.redis.codec.values import headers_of, progress_of
from tasuki.core.console import Listed
from tasuki.core.flowrecords import ResultRecord
from tasuki.core.message import DeadLetter, ErrorInfo
from tasuki.core.reasons import describe
from tasuki.core.records import (
    Delivery,
    HistoryEntry,
    MessageInfo,
    MessageState,
    QueueStats,
    StepRecord,
    waiting_state,
)

T = TypeVar("T")


# A reader is a function whose positional parameters are the fields of one kind of record,
# named and ordered as its script's `--- @reply` line declares them. Where a record needs
# context to become a value (its queue), a factory makes the reader once per reply: the
# lease's records are read per message, and a plain call is what costs least.


def records(reply: Sequence[Any], reader: Callable[..., T], start: int = 0) -> Iterator[T]:
    """The records of a flat reply from `start` on, each read by `reader`."""
    fields = iter(reply)
    for _ in range(start):
        next(fields)
    width = reader.__code__.co_argcount
    return starmap(reader, zip(*[fields] * width, strict=True))


def fields_of(reader: Callable[..., Any]) -> tuple[str, ...]:
    """The record fields a reader reads: its positional parameters, in order."""
    code = reader.__code__
    return code.co_varnames[: code.co_argcount]


def leased(queue: str, default_vt: float) -> Callable[..., Delivery]:
    """A reader of lease.lua's `leased` records: a Delivery each."""

    def read(
        id: bytes,
        body: bytes,
        headers: bytes,
        attempt: int,
        max_attempts: int,
        enqueued_us: bytes,
        token: bytes,
        fence: int,
        vt_us: int,
    ) -> Delivery:
        return Delivery(
            queue,
            id.decode(),
            body,
            headers_of(headers),
            attempt,
            max_attempts,
            int(enqueued_us) / 1e6,
            token.decode(),
            fence,
            vt_us / 1e6 if vt_us else default_vt,
        )

    return read


def deliveries(queue: str, reply: list[Any], default_vt: float) -> list[Delivery]:
    """lease.lua's reply: a hint, then a `leased` record per message."""
    return list(records(reply, leased(queue, default_vt), 1))


def dead_letter(queue: str) -> Callable[..., DeadLetter]:
    """A reader of `dead_letter` records (`includes/dead_letter_fields.lua`)."""

    def read(
        id: bytes,
        body: bytes,
        headers: bytes,
        attempt: bytes,
        reason: bytes,
        error_type: bytes,
        error_message: bytes,
        error_traceback: bytes,
        died_us: bytes,
        enqueued_us: bytes,
        max_attempts: bytes,
    ) -> DeadLetter:
        tries = int(attempt or 0)
        limit = int(max_attempts) if max_attempts else None
        return DeadLetter(
            id=id.decode(),
            queue=queue,
            body=body,
            headers=headers_of(headers),
            attempt=tries,
            reason=describe(reason.decode(), tries, limit),
            error=_error(error_type, error_message, error_traceback),
            died_at=int(died_us) / 1e6 if died_us else 0.0,
            enqueued_at=int(enqueued_us) / 1e6 if enqueued_us else 0.0,
        )

    return read


def dead_letters(queue: str, reply: list[Any]) -> list[DeadLetter]:
    return list(records(reply, dead_letter(queue)))


def in_flight(queue: str) -> Callable[..., MessageInfo]:
    """A reader of in_flight.lua's `in_flight` records."""

    def read(
        id: bytes,
        expires_us: bytes,
        attempt: bytes,
        max_attempts: bytes,
        fence: bytes,
        enqueued_us: bytes,
        priority: bytes,
        progress: bytes,
    ) -> MessageInfo:
        return MessageInfo(
            queue,
            id.decode(),
            "in_flight",
            attempt=int(attempt),
            max_attempts=int(max_attempts),
            fencing_token=int(fence),
            enqueued_at=int(enqueued_us) / 1e6,
            lease_expires_at=float(expires_us) / 1e6,
            progress=progress_of(progress, fence),
            priority=int(priority or 0),
        )

    return read


def leases_in_flight(queue: str, reply: list[Any]) -> list[MessageInfo]:
    return list(records(reply, in_flight(queue)))


def message(queue: str, id: str, where: str, at: float, now: float) -> Callable[..., MessageInfo]:
    """A reader of inspect.lua's `message` record, of a message found `where` (its ZSET)
    with score `at`."""

    def read(
        attempt: bytes,
        max_attempts: bytes,
        fence: bytes,
        enqueued_us: bytes,
        reason: bytes,
        error_type: bytes,
        error_message: bytes,
        error_traceback: bytes,
        hist: bytes,
        priority: bytes,
        progress: bytes,
    ) -> MessageInfo:
        tries = int(attempt or 0)
        state: MessageState
        visible_at = lease_expires_at = died_at = None
        if where == "dead":
            state, died_at = "dead", at
        elif where == "leased" and at > now:
            state, lease_expires_at = "in_flight", at
        else:
            state, visible_at = waiting_state(at, now), at
        dead = state == "dead"
        return MessageInfo(
            queue,
            id,
            state,
            attempt=tries,
            max_attempts=int(max_attempts) if max_attempts else None,
            fencing_token=int(fence or 0),
            enqueued_at=int(enqueued_us) / 1e6 if enqueued_us else None,
            visible_at=visible_at,
            lease_expires_at=lease_expires_at,
            reason=describe(reason.decode(), tries, int(max_attempts or 0)) if dead else "",
            error=_error(error_type, error_message, error_traceback) if dead else None,
            died_at=died_at,
            history=history(hist),
            # Only a current lease has progress: a lapsed one's job no longer runs.
            progress=progress_of(progress, fence) if state == "in_flight" else None,
            priority=int(priority or 0),
        )

    return read


def message_info(queue: str, id: str, reply: list[Any]) -> MessageInfo:
    """inspect.lua's reply: {now, where, ...}: 'none'; 'done' with the id's remaining
    window (ms) and its history; else the score and a `message` record."""
    now, where = int(reply[0]) / 1e6, reply[1].decode()
    if where == "none":
        return MessageInfo(queue, id, "unknown")
    if where == "done":
        window_ms, story = reply[2:]
        return MessageInfo(
            queue, id, "finished", finished_until=now + int(window_ms) / 1e3, history=history(story)
        )
    if where == "cancelled":
        return MessageInfo(queue, id, "cancelled", finished_until=now + int(reply[2]) / 1e3)
    [info] = records(reply, message(queue, id, where, float(reply[2]) / 1e6, now), 3)
    return info


def result_record(reply: list[Any]) -> ResultRecord | None:
    """result.lua's reply: {now µs}, {now µs, 'p'} or {now µs, record, TTL ms}."""
    if len(reply) == 1:
        return None
    if len(reply) == 2:
        return ResultRecord("pending")
    record: bytes = reply[1]
    expires_at = int(reply[0]) / 1e6 + max(0, int(reply[2])) / 1e3
    return ResultRecord("ok" if record[:1] == b"o" else "failed", record[1:], expires_at)


def stats(
    ready: int, in_flight: int, delayed: int, dead: int, oldest_ready_age_us: int
) -> QueueStats:
    """stats.lua's `stats` record."""
    return QueueStats(ready, in_flight, delayed, dead, oldest_ready_age_us / 1e6)


def history(raw: bytes) -> tuple[HistoryEntry, ...]:
    """The `hist` field (or a finished id's value): see lua/includes/history.lua."""
    if not raw or raw == b"1":
        return ()
    return tuple(
        HistoryEntry(int(at) / 1e6, event, int(fence), detail)
        for at, event, fence, detail in orjson.loads(raw)
    )


def _error(etype: bytes, emessage: bytes, etraceback: bytes) -> ErrorInfo | None:
    if not etype:
        return None
    return ErrorInfo(etype.decode(), emessage.decode(), etraceback.decode())


def step(
    name: bytes, occurrence: bytes, result: bytes, started: bytes, duration: bytes
) -> StepRecord:
    """A reader of steps.lua's `step` records."""
    return StepRecord(name.decode(), int(occurrence), result, float(started), float(duration))


def listed(queue: str, state: str, now: float) -> Callable[..., Listed]:
    """A reader of browse.lua's `listed` records, of a listing of `state`: a `Listed` each,
    its `MessageInfo` read as inspect.lua's `message` record is."""
    where = {"in_flight": "leased", "dead": "dead"}.get(state, "waiting")

    def read(
        id: bytes,
        score: bytes,
        at: bytes,
        body: bytes,
        headers: bytes,
        attempt: bytes,
        max_attempts: bytes,
        fence: bytes,
        enqueued_us: bytes,
        reason: bytes,
        error_type: bytes,
        error_message: bytes,
        error_traceback: bytes,
        hist: bytes,
        priority: bytes,
        progress: bytes,
    ) -> Listed:
        name = id.decode()
        info = message(queue, name, where, int(at) / 1e6, now)(
            attempt,
            max_attempts,
            fence,
            enqueued_us,
            reason,
            error_type,
            error_message,
            error_traceback,
            hist,
            priority,
            progress,
        )
        return Listed(info, body, headers_of(headers), f"{score.decode()}:{name}")

    return read


def worker(id: bytes, seen_us: bytes, info: bytes) -> tuple[str, int, bytes]:
    """A reader of workers.lua's `worker` records: id, when seen (µs), its announce."""
    return id.decode(), int(seen_us), info


def total(field: bytes, amount: int) -> tuple[tuple[str, str], int]:
    """A reader of job_stats.lua's `total` records: (job, count name) and its sum."""
    job, _, name = field.decode().rpartition("\n")
    return (job, name), int(amount)
