"""arq's side: the no-op coroutine and the settings for
`arq benchmarks.peers.arq_app.WorkerSettings`."""

from __future__ import annotations

import os
from typing import Any

from arq.connections import RedisSettings

from benchmarks.marks import mark
from benchmarks.shape_jobs import arun

REDIS = RedisSettings.from_dsn(os.environ["BENCH_REDIS_URL"])
POLL_DELAY = 0.05  # arq's default is 0.5 s between polls of the queue
#: arq's default; 100 and 1000 were slower here (the shapes benchmark sweeps it)
MAX_JOBS = int(os.environ.get("BENCH_ARQ_MAX_JOBS", "10"))


async def noop(ctx: dict[str, Any], i: int) -> None:
    mark(i)


async def shape(ctx: dict[str, Any], i: int) -> None:
    await arun(i)


#: connections in the worker's pool (shape io50: every running job writes its result and
#: clean-up through it); unset, redis-py's default of 100, which raises "Too many
#: connections" at max_jobs 1,024. arq 0.25's `RedisSettings` has no pool size: its users
#: hand the worker a pool of their own (`redis_pool=ArqRedis(connection_pool=...)`).
POOL = int(os.environ.get("BENCH_ARQ_POOL", "0"))


class WorkerSettings:
    functions = [noop, shape]
    redis_settings = REDIS
    poll_delay = POLL_DELAY
    max_jobs = MAX_JOBS


if POOL:
    from arq.connections import ArqRedis
    from redis.asyncio import ConnectionPool

    WorkerSettings.redis_pool = ArqRedis(  # type: ignore[attr-defined]
        connection_pool=ConnectionPool.from_url(os.environ["BENCH_REDIS_URL"], max_connections=POOL)
    )
