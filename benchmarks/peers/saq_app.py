"""SAQ's side: a Redis queue, the no-op coroutine, and the settings for
`saq benchmarks.peers.saq_app.settings`."""

from __future__ import annotations

import os
from typing import Any

from saq import Queue

from benchmarks.marks import mark
from benchmarks.shape_jobs import arun

QUEUE = "bench"
#: SAQ's default is 10; each concurrent dequeue holds a connection (pool: 100)
CONCURRENCY = int(os.environ.get("BENCH_SAQ_CONCURRENCY", "32"))


#: connections in the worker's pool (shape io50: each concurrent dequeue blocks on one in
#: BLMOVE, and each job's updates take another); unset, redis-py's default of 100, which
#: stalls concurrency 256 and up. SAQ's docs: build the queue on your own client,
#: `RedisQueue(redis.asyncio.from_url(url, max_connections=...))`.
POOL = int(os.environ.get("BENCH_SAQ_POOL", "0"))


def make_queue() -> Queue:
    url = os.environ["BENCH_REDIS_URL"]
    if not POOL:
        return Queue.from_url(url, name=QUEUE)
    from redis import asyncio as aioredis
    from saq.queue.redis import RedisQueue

    return RedisQueue(aioredis.from_url(url, max_connections=POOL), name=QUEUE)


async def noop(ctx: dict[str, Any], *, i: int) -> None:
    mark(i)


async def shape(ctx: dict[str, Any], *, i: int) -> None:
    await arun(i)


def settings() -> dict[str, Any]:
    return {"queue": make_queue(), "functions": [noop, shape], "concurrency": CONCURRENCY}
