"""Enqueueing on Redis: a batch grouped by queue, checked before any of it is written,
and stored by `enqueue.lua`, one script call per queue (and per `CHUNK` messages), the
calls of a large enqueue pipelined."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tasuki.backends.base import Enqueued, Envelope
from tasuki.backends.redis import codec
from tasuki.backends.redis.keys import QueueKeys
from tasuki.backends.redis.plumbing import CHUNK, Plumbing
from tasuki.backends.redis.slots import key_slot
from tasuki.errors import InvalidArgument, MessageTooLarge

# An enqueue this large is sent as several script calls, each on its way while the
# next is built (Connection.run_each).
PIPELINED = 250
# How often a producer re-adds a queue to the `queues` set (it is a SET: re-adding is free).
ANNOUNCE_EVERY = 60.0


def enqueue(redis: Plumbing, envelopes: Sequence[Envelope], aging: float) -> list[Enqueued]:
    if not envelopes:
        return []
    check(redis, envelopes)
    first = envelopes[0].queue
    if len(envelopes) == 1:  # one-by-one enqueue: the common case of a web request
        keys = redis.keys.queue(first)
        announce(redis, first)
        return _enqueue_chunk(redis, keys, list(envelopes), aging)
    if all(env.queue == first for env in envelopes):
        groups = {first: list(range(len(envelopes)))}
    else:
        groups = {}
        for n, env in enumerate(envelopes):
            groups.setdefault(env.queue, []).append(n)
    results: list[Enqueued] = [Enqueued("", "duplicate")] * len(envelopes)
    for queue, indices in groups.items():
        keys = redis.keys.queue(queue)
        announce(redis, queue)
        for start in range(0, len(indices), CHUNK):
            part = indices[start : start + CHUNK]
            batch = [envelopes[n] for n in part]
            for n, result in zip(part, _enqueue_chunk(redis, keys, batch, aging), strict=True):
                results[n] = result
    return results


def announce(redis: Plumbing, queue: str) -> None:
    """Add the queue to the `queues` set, at most once a minute per process.

    It is a key of its own slot on Cluster, so it can't join the enqueue script; it is
    added *before* the messages, so a listed queue may be empty but a queue with
    messages is always listed.
    """
    conn = redis.connection()
    marker = (redis.keys.queues, queue)
    now = time.monotonic()
    if now - conn.announced.get(marker, -ANNOUNCE_EVERY) >= ANNOUNCE_EVERY:
        redis.command("SADD", redis.keys.queues, queue)
        conn.announced[marker] = now


def check(redis: Plumbing, envelopes: Sequence[Envelope]) -> None:
    """Refuse a bad batch before any of it is written."""
    limit = redis.options.max_message_size
    cluster = redis.connection().cluster
    for env in envelopes:
        if len(env.body) > limit:
            raise MessageTooLarge(
                f"message {env.id!r} is {len(env.body):,} bytes; the limit of "
                f"{redis.url} is {limit:,} (option max_message_size)"
            )
        claim = env.unique
        if cluster and claim is not None:
            lock_slot = key_slot(redis.keys.lock(claim.key).encode())
            if lock_slot != key_slot(redis.keys.queue(env.queue).waiting.encode()):
                raise InvalidArgument(
                    f"unique key {claim.key!r} is not in the Redis Cluster slot of queue "
                    f"{env.queue!r}; start it with the queue's hash tag, "
                    f"e.g. '{{{env.queue}}}unique:...'"
                )


def _enqueue_chunk(
    redis: Plumbing, keys: QueueKeys, batch: list[Envelope], aging: float
) -> list[Enqueued]:
    """Store `batch` (one queue): one script call per PIPELINED messages, pipelined."""
    lock = redis.keys.lock
    if len(batch) <= PIPELINED:
        script_keys, args = codec.enqueue_call(keys, lock, batch, aging)
        return codec.enqueued(batch, redis.eval("enqueue", script_keys, args))
    parts = [batch[i : i + PIPELINED] for i in range(0, len(batch), PIPELINED)]
    calls = (codec.enqueue_call(keys, lock, part, aging) for part in parts)
    out: list[Enqueued] = []
    for part, reply in zip(parts, redis.connection().run_each("enqueue", calls), strict=True):
        out += codec.enqueued(part, reply)
    return out
