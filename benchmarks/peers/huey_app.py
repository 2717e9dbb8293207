"""Huey's side: RedisHuey (blocking BRPOP dequeue), results off, the no-op task."""

from __future__ import annotations

import os
from typing import Any

from huey import RedisHuey

from benchmarks.marks import mark
from benchmarks.shape_jobs import run

#: connections in the consumer's pool (shape io50: one per worker, each blocks in BRPOP,
#: plus the scheduler's); unset, redis-py's default of 100, which stalls `-w 256` and up.
#: Huey's docs: pass your own `connection_pool=ConnectionPool(max_connections=...)`.
POOL = int(os.environ.get("BENCH_HUEY_POOL", "0"))


def _storage() -> dict[str, Any]:
    url = os.environ["BENCH_REDIS_URL"]
    if not POOL:
        return {"url": url}
    from redis import ConnectionPool

    return {"connection_pool": ConnectionPool.from_url(url, max_connections=POOL)}


huey = RedisHuey(
    "bench",
    **_storage(),
    results=False,  # nothing reads results: don't store them
    blocking=True,  # BRPOP instead of polling with backoff (Huey's default too)
)


@huey.task(name="noop")
def noop(i: int) -> None:
    mark(i)


@huey.task(name="shape")
def shape(i: int) -> None:
    run(i)
