"""Between tasuki's records and the Redis scripts' arguments and replies, in one place.

Out: an `Envelope` becomes `enqueue.lua`'s fields of one message, a `Settle` becomes
`settle.lua`'s fields of one item. In: each script that returns records declares their
fields in its header, `--- @reply NAME: field field ...`, and each record is read here
by a reader whose positional parameters are those fields, by name, in that order
(`tests/backends/redis/test_redis_codec.py` holds the two together): a `leased` record
becomes a `Delivery`, a `dead_letter` a `DeadLetter`, `in_flight` and `message` records
a `MessageInfo`. Times in Redis are whole microseconds (TTLs milliseconds); here, seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import starmap
from typing import Any, TypeVar

import orjson

from tasuki.backends.redis.keys import FlowKeys, QueueKeys
from tasuki.core.flowrecords import ResultRecord, error_json
from tasuki.core.message import DeadLetter, ErrorInfo
from tasuki.core.reasons import describe
from tasuki.core.records import (
    Delivery,
    Enqueued,
    EnqueueStatus,
    Envelope,
    HistoryEntry,
    Keep,
    Limit,
    MessageInfo,
    MessageState,
    Progress,
    QueueStats,
    Settle,
    death_detail,
    error_summary,
    release_event,
    waiting_state,
)

T = TypeVar("T")

# Enqueue verdicts by the code enqueue.lua returns.
_STATUS: tuple[EnqueueStatus, ...] = ("enqueued", "duplicate", "conflict", "replaced")
_EMPTY_HEADERS = b"{}"


def us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def ms(seconds: float) -> int:
    """A TTL for PX: at least 1 ms (Redis refuses 0), so a zero TTL lapses at once."""
    return max(1, round(seconds * 1000))


def headers_json(headers: Any) -> bytes:
    if not headers:
        return _EMPTY_HEADERS
    return orjson.dumps(headers if type(headers) is dict else dict(headers))


def headers_of(raw: bytes) -> dict[str, str]:
    if raw == _EMPTY_HEADERS or not raw:
        return {}
    headers: dict[str, str] = orjson.loads(raw)
    return headers


# -- out ---------------------------------------------------------------------------------
def enqueue_call(
    keys: QueueKeys, lock_key: Callable[[str], str], batch: Sequence[Envelope], aging: float
) -> tuple[list[str], list[Any]]:
    """enqueue.lua's KEYS and ARGV for `batch` (one queue): per message, the fields its
    header lists, a uniqueness lock as the index of its key among the KEYS; `aging` is
    the backend's `priority_aging`."""
    script_keys = [
        keys.waiting,
        keys.signal,
        keys.keep,
        keys.results,
        keys.delayed,
        keys.limited,
    ]
    args: list[Any] = [keys.base, len(batch), us(aging)]
    for env in batch:
        claim = env.unique
        if claim is None:
            args += message_fields(env, 0)
        else:
            script_keys.append(lock_key(claim.key))
            args += message_fields(env, len(script_keys) - 6)
    return script_keys, args


def message_fields(env: Envelope, lock: int | str) -> tuple[Any, ...]:
    """One message's 13 fields as `lua/includes/enqueue.lua` reads them; `lock` names its
    uniqueness lock (an index among enqueue.lua's KEYS, or the key itself in a section)."""
    claim = env.unique
    return (
        env.id,
        env.body,
        headers_json(env.headers),
        us(env.delay),
        env.max_attempts,
        "" if env.visibility_timeout is None else us(env.visibility_timeout),
        ms(env.keep_id) if env.keep_id > 0 else 0,
        lock,
        0 if claim is None else ms(claim.ttl),
        0 if claim is None else int(claim.replace),
        ms(env.keep_result) if env.keep_result > 0 else 0,
        env.priority,
        limits_json(env.limits) if env.limits else b"",
    )


def sections(
    queue_keys: Callable[[str], QueueKeys],
    lock_key: Callable[[str], str],
    envelopes: Sequence[Envelope],
) -> list[Any]:
    """Messages of any queues as `enqueue_sections` reads them: the number of queues, then
    per queue its key base, its number of messages and their fields, in input order."""
    groups: dict[str, list[Envelope]] = {}
    for env in envelopes:
        groups.setdefault(env.queue, []).append(env)
    args: list[Any] = [len(groups)]
    for queue, batch in groups.items():
        args += (queue_keys(queue).base, len(batch))
        for env in batch:
            args += message_fields(env, "" if env.unique is None else lock_key(env.unique.key))
    return args


def effects_args(
    items: Sequence[Settle],
    flow_keys: Callable[[str], FlowKeys],
    queue_keys: Callable[[str], QueueKeys],
    lock_key: Callable[[str], str],
    aging: float,
) -> list[Any]:
    """What follows settle.lua's items when some carry workflow effects: their number,
    priority_aging, then per item with effects its number and its block
    (`lua/includes/flows.lua`, `apply_effects`); nothing when none does."""
    blocks: list[Any] = []
    count = 0
    for k, item in enumerate(items, 1):
        effects = item.effects
        if effects is None or item.verdict == "release":
            continue
        count += 1
        ttl = ms(effects.ttl)
        if effects.flow is None:
            blocks += (k, "", "", ttl)
        else:
            keys = flow_keys(effects.flow)
            blocks += (k, keys.record, keys.notify, ttl)
        failed = b"" if effects.failed is None else effects.failed.to_json()
        blocks += (int(effects.final), failed, len(effects.fills))
        for fill in effects.fills:
            keys = flow_keys(fill.flow)
            blocks += (keys.slots(fill.barrier), keys.value(fill.barrier), fill.slot, fill.size)
        blocks += sections(queue_keys, lock_key, effects.enqueue)
    if not count:
        return []
    return [count, us(aging), *blocks]


def limits_json(limits: Sequence[Limit]) -> bytes:
    """A message's limits as the scripts read them (`lua/includes/limits.lua`)."""
    return orjson.dumps(
        [
            [lim.key, "c" if lim.kind == "concurrency" else "r", lim.limit, us(lim.per)]
            for lim in limits
        ]
    )


def enqueued(batch: Sequence[Envelope], reply: list[Any]) -> list[Enqueued]:
    """enqueue.lua's reply: a status code per message, or {code, holder id}."""
    out: list[Enqueued] = []
    for env, r in zip(batch, reply, strict=True):
        if isinstance(r, int):
            out.append(Enqueued(env.id, _STATUS[r]))
        else:
            out.append(Enqueued(r[1].decode(), _STATUS[r[0]]))
    return out


def settle_keys(keys: QueueKeys) -> list[str]:
    return [
        keys.waiting,
        keys.leased,
        keys.leases,
        keys.dead,
        keys.keep,
        keys.counts,
        keys.signal,
        keys.results,
        keys.delayed,
        keys.waiters,
        keys.limited,
    ]


def settle_args(base: str, items: Sequence[Settle]) -> list[Any]:
    """settle.lua's ARGV: the verdicts as one letter each, then each item's fields."""
    if all(item.verdict == "ack" and item.effects is None for item in items):  # the common batch
        args: list[Any] = [base, "a" * len(items)]
        for item in items:
            args += (item.receipt.id, item.receipt.token)
        return args
    letters = []
    args = [base, ""]
    for item in items:
        r = item.receipt
        if item.verdict == "ack":
            value = item.effects.result if item.effects is not None else None
            if value is None:
                letters.append("a")
                args += (r.id, r.token)
            else:
                letters.append("A")
                args += (r.id, r.token, value)
        elif item.verdict == "release":
            letters.append("r")
            event, detail = release_event(item.delay, item.penalty, error_summary(item.error))
            args += (r.id, r.token, us(item.delay), 0 if item.penalty else 1, event, detail)
        else:
            letters.append("d")
            err = item.error
            args += (
                r.id,
                r.token,
                item.reason,
                "" if err is None else err.type,
                "" if err is None else err.message,
                "" if err is None else err.traceback,
                death_detail(item.reason, err),
                error_json(err, item.reason),
            )
    args[1] = "".join(letters)
    return args


def keep_args(base: str, items: Sequence[Keep]) -> list[Any]:
    """keep.lua's ARGV: per item its id, token, visibility timeout and progress."""
    args: list[Any] = [base]
    for item in items:
        r = item.receipt
        progress = b""
        if item.progress is not None:
            progress = progress_json(r.token.rpartition(".")[2], item.progress)
        args += (r.id, r.token, us(item.visibility_timeout), progress)
    return args


# -- in ----------------------------------------------------------------------------------
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


def progress_json(fence: str, progress: Progress) -> bytes:
    """The `progress` field keep.lua stores: the lease's fence, then the JSON."""
    return fence.encode() + b" " + orjson.dumps([progress.fraction, progress.text])


def progress_of(raw: bytes, fence: bytes) -> Progress | None:
    """The `progress` field, if the message's current lease (`fence`) stored it."""
    if not raw:
        return None
    stored_fence, _, data = raw.partition(b" ")
    if stored_fence != (fence or b"0"):
        return None
    fraction, text = orjson.loads(data)
    return Progress(float(fraction), str(text))


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
