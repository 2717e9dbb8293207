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


class WorkerSettings:
    functions = [noop, shape]
    redis_settings = REDIS
    poll_delay = POLL_DELAY
    max_jobs = MAX_JOBS
