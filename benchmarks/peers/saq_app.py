"""SAQ's side: a Redis queue, the no-op coroutine, and the settings for
`saq benchmarks.peers.saq_app.settings`."""

from __future__ import annotations

import os
from typing import Any

from saq import Queue

from benchmarks.marks import mark

QUEUE = "bench"
CONCURRENCY = 32  # SAQ's default is 10; each concurrent dequeue holds a connection (pool: 100)


def make_queue() -> Queue:
    return Queue.from_url(os.environ["BENCH_REDIS_URL"], name=QUEUE)


async def noop(ctx: dict[str, Any], *, i: int) -> None:
    mark(i)


def settings() -> dict[str, Any]:
    return {"queue": make_queue(), "functions": [noop], "concurrency": CONCURRENCY}
