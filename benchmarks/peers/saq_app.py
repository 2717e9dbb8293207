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


def make_queue() -> Queue:
    return Queue.from_url(os.environ["BENCH_REDIS_URL"], name=QUEUE)


async def noop(ctx: dict[str, Any], *, i: int) -> None:
    mark(i)


async def shape(ctx: dict[str, Any], *, i: int) -> None:
    await arun(i)


def settings() -> dict[str, Any]:
    return {"queue": make_queue(), "functions": [noop, shape], "concurrency": CONCURRENCY}
