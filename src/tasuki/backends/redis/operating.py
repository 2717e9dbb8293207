"""Operating a Redis queue: counts, dead letters, inspection, redrive and purge, each a
call of its read-only or chunked script, the reply read by `codec/`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from tasuki.backends.base import MessageInfo, QueueStats, Reliability, SettledTotals
from tasuki.backends.redis import codec
from tasuki.backends.redis.keys import FlowKeys
from tasuki.backends.redis.plumbing import CHUNK, Plumbing
from tasuki.backends.redis.slots import key_slot
from tasuki.core.flowrecords import flow_of
from tasuki.core.message import DeadLetter

# Messages removed per script call by purge / purge_dead / redrive-all.
PURGE_CHUNK = 1000


def stats(redis: Plumbing, queue: str) -> QueueStats:
    keys = redis.keys.queue(queue)
    script_keys = [keys.waiting, keys.leased, keys.dead, keys.delayed]
    reply = redis.eval("stats", script_keys, [keys.base])
    result: QueueStats = codec.stats(*reply)
    return result


def queues(redis: Plumbing) -> list[str]:
    names = sorted(m.decode() for m in redis.command("SMEMBERS", redis.keys.queues))
    if not names:
        return []
    exists = []
    for name in names:
        keys = redis.keys.queue(name)
        exists.append(("EXISTS", keys.waiting, keys.leased, keys.dead, keys.delayed))
    counts = redis.connection().pipeline(exists)
    return [name for name, n in zip(names, counts, strict=True) if n]


def dead_letters(
    redis: Plumbing, queue: str, limit: int = 100, offset: int = 0
) -> list[DeadLetter]:
    keys = redis.keys.queue(queue)
    reply = redis.eval("dead_letters", [keys.dead], [keys.base, max(0, offset), limit])
    return codec.dead_letters(queue, reply)


def dead_letter(redis: Plumbing, queue: str, id: str) -> DeadLetter | None:
    keys = redis.keys.queue(queue)
    reply = redis.eval("dead_letter", [keys.dead], [keys.base, id])
    letters = codec.dead_letters(queue, reply)
    return letters[0] if letters else None


def in_flight(redis: Plumbing, queue: str, limit: int = 100) -> list[MessageInfo]:
    keys = redis.keys.queue(queue)
    reply = redis.eval("in_flight", [keys.leased], [keys.base, limit])
    return codec.leases_in_flight(queue, reply)


def settled_totals(redis: Plumbing, queue: str) -> SettledTotals:
    acked, dead = redis.command("HMGET", redis.keys.queue(queue).counts, "acked", "dead")
    return SettledTotals(int(acked or 0), int(dead or 0))


def reliability(redis: Plumbing, queue: str) -> Reliability:
    raw = redis.command("HGETALL", redis.keys.queue(queue).counts) or []
    fields = {raw[i].decode(): int(raw[i + 1]) for i in range(0, len(raw), 2)}
    return Reliability.from_meters(fields)


def add_meters(redis: Plumbing, queue: str, increments: Mapping[str, int]) -> None:
    args: list[Any] = []
    for name, value in increments.items():
        if value:
            args += [name, int(value)]
    if args:
        redis.eval("add_meters", [redis.keys.queue(queue).counts], args)


def inspect(redis: Plumbing, queue: str, id: str) -> MessageInfo:
    keys = redis.keys.queue(queue)
    script_keys = [keys.waiting, keys.leased, keys.dead, keys.delayed]
    reply = redis.eval("inspect", script_keys, [keys.base, id])
    return codec.message_info(queue, id, reply)


def inspect_body(
    redis: Plumbing, queue: str, id: str
) -> tuple[MessageInfo, bytes | None, dict[str, str]]:
    """`inspect`, with a stored message's body and headers read by the same script call
    (None and {} for a message no longer stored: finished, cancelled, unknown)."""
    keys = redis.keys.queue(queue)
    script_keys = [keys.waiting, keys.leased, keys.dead, keys.delayed]
    reply = redis.eval("inspect", script_keys, [keys.base, id, "1"])
    if reply[1] in (b"waiting", b"leased", b"dead"):
        body, headers = reply[-2], reply[-1]
        return codec.message_info(queue, id, reply[:-2]), bytes(body), _headers(headers)
    return codec.message_info(queue, id, reply), None, {}


def _headers(raw: bytes) -> dict[str, str]:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def redrive(redis: Plumbing, queue: str, ids: Sequence[str] | None = None) -> int:
    keys = redis.keys.queue(queue)
    if ids is None:  # the oldest dead first, a chunk per call
        total = 0
        while True:
            found = redis.command("ZRANGE", keys.dead, 0, PURGE_CHUNK - 1)
            total += _redrive(redis, queue, [i.decode() for i in found])
            if len(found) < PURGE_CHUNK:
                return total
    return sum(
        _redrive(redis, queue, list(ids[start : start + CHUNK]))
        for start in range(0, len(ids), CHUNK)
    )


def _redrive(redis: Plumbing, queue: str, ids: list[str]) -> int:
    if not ids:
        return 0
    keys = redis.keys.queue(queue)
    script_keys = [keys.waiting, keys.dead, keys.signal, keys.results, keys.limited]
    records = flow_records(redis, queue, ids)
    flows = list(dict.fromkeys(r for r in records if r))
    script_keys += flows
    args: list[Any] = [keys.base, queue]
    for id, record in zip(ids, records, strict=True):
        args += [id, flows.index(record) + 6 if record else 0]
    n: int = redis.eval("redrive", script_keys, args)
    return n


def flow_records(redis: Plumbing, queue: str, ids: Sequence[str]) -> list[str]:
    """The record key of the flow each message is a step of ('' for none), read from its
    flow header (which never changes) and the flow's home: the redrive script resumes the
    flow whose failure the message is. On Redis Cluster a flow's keys share its steps'
    slot (`start_flow`); a key of another slot is left out."""
    keys = redis.keys.queue(queue)
    connection = redis.connection()
    headers = connection.pipeline([("HGET", f"{keys.base}m:{id}", "headers") for id in ids])
    flow_ids = [None if h is None else flow_of(orjson.loads(h)) for h in headers]
    named = sorted({f for f in flow_ids if f is not None})
    homes = connection.pipeline([("GET", redis.keys.flow_home(f)) for f in named])
    slot = key_slot(keys.base.encode())
    records: dict[str, str] = {}
    for flow_id, home in zip(named, homes, strict=True):
        if home is None:
            continue
        base = redis.keys.queue(home.decode()).base
        if not connection.cluster or key_slot(base.encode()) == slot:
            records[flow_id] = FlowKeys(base, flow_id).record
    return ["" if f is None else records.get(f, "") for f in flow_ids]


def purge_dead(redis: Plumbing, queue: str) -> int:
    keys = redis.keys.queue(queue)
    return _drain(redis, "purge_dead", [keys.dead, keys.keep], keys.base)


def purge(redis: Plumbing, queue: str) -> int:
    keys = redis.keys.queue(queue)
    script_keys = [
        keys.waiting,
        keys.leased,
        keys.dead,
        keys.leases,
        keys.keep,
        keys.signal,
        keys.delayed,
        keys.results,
        keys.waiters,
        keys.limited,
    ]
    return _drain(redis, "purge", script_keys, keys.base)


def _drain(redis: Plumbing, script: str, keys: list[str], base: str) -> int:
    """Call a chunked removal script until a call removes less than a full chunk."""
    total = 0
    while True:
        n: int = redis.eval(script, keys, [base, PURGE_CHUNK])
        total += n
        if n < PURGE_CHUNK:
            return total
