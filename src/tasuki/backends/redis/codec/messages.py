"""Out: tasuki's records as the Redis scripts' KEYS and ARGV. An `Envelope` becomes
`enqueue.lua`'s fields of one message, a `Settle` `settle.lua`'s fields of one item
(with its workflow effects), a `Keep` `keep.lua`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tasuki.backends.redis.codec.values import headers_json, ms, progress_json, us
from tasuki.backends.redis.keys import FlowKeys, QueueKeys
from tasuki.core.flowrecords import error_json
from tasuki.core.records import (
    Enqueued,
    EnqueueStatus,
    Envelope,
    Keep,
    Limit,
    Settle,
    death_detail,
    error_summary,
    release_event,
)

# Enqueue verdicts by the code enqueue.lua returns.
_STATUS: tuple[EnqueueStatus, ...] = ("enqueued", "duplicate", "conflict", "replaced")


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
            event, detail = release_event(item.delay, item.penalty, error_summary(item.error))
            args += (r.id, r.token, us(item.delay), 0 if item.penalty else 1, event, detail)
            if item.wait is None:
                letters.append("r")
            else:
                letters.append("s")
                args.append(item.wait.signal)
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
