"""Durable steps on Redis (DESIGN §4c): step records, signals and waits, each operation
one script (`lua/record_step.lua`, `take_signal.lua`, `send_signal.lua`, `steps.lua`,
`waiting.lua`; the suspend is a verdict of `settle.lua`).

They live in the message's own hash (`lua/includes/durable.lua`), so they go with it in
the same DEL (ack, cancel, purge, dead-letter purge), a redrive keeps them, and an id
enqueued again after its message went starts with none: neither a key TTL nor a
maintenance service is needed, and an ack costs what it did. Every write checks the
lease token in the same script, so a zombie's record is refused; a wait is tagged with
the fence of the lease that suspended, so the next lease ends it without a write.
"""

from __future__ import annotations

import time

from tasuki.backends.base import Receipt, SignalStatus, StepRecord, Taken, Waiting
from tasuki.backends.redis import codec
from tasuki.backends.redis.plumbing import Plumbing


def steps(redis: Plumbing, queue: str, id: str) -> list[StepRecord]:
    keys = redis.keys.queue(queue)
    return list(codec.records(redis.eval("steps", [keys.base + "m:" + id], []), codec.step))


def record_step(redis: Plumbing, receipt: Receipt, record: StepRecord) -> bool:
    keys = redis.keys.queue(receipt.queue)
    args = [
        keys.base,
        receipt.id,
        receipt.token,
        record.name,
        record.occurrence,
        record.result,
        repr(record.started_at),
        repr(record.duration),
    ]
    return bool(redis.eval("record_step", [keys.leases], args) == 1)


def take_signal(redis: Plumbing, receipt: Receipt, name: str, occurrence: int) -> Taken:
    keys = redis.keys.queue(receipt.queue)
    args = [keys.base, receipt.id, receipt.token, name, occurrence, repr(time.time())]
    reply = redis.eval("take_signal", [keys.leases], args)
    if reply[0] == 0:
        return Taken(False, None)
    return Taken(True, bytes(reply[1]) if len(reply) > 1 else None)


def signal(redis: Plumbing, queue: str, id: str, name: str, payload: bytes) -> SignalStatus:
    keys = redis.keys.queue(queue)
    script_keys = [keys.waiting, keys.delayed, keys.dead, keys.signal]
    reply = redis.eval("send_signal", script_keys, [keys.base, id, name, payload])
    return "delivered" if _text(reply) == "delivered" else "unknown"


def waiting(redis: Plumbing, queue: str, id: str) -> Waiting | None:
    keys = redis.keys.queue(queue)
    reply = redis.eval("waiting", [keys.base + "m:" + id], [])
    if not reply:
        return None
    return Waiting(_text(reply[0]), int(reply[1]) / 1e6)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
