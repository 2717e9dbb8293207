"""arq's side: the no-op coroutine and the settings for
`arq benchmarks.peers.arq_app.WorkerSettings`."""

from __future__ import annotations

import os
from typing import Any

from arq.connections import RedisSettings

from benchmarks.marks import mark

REDIS = RedisSettings.from_dsn(os.environ["BENCH_REDIS_URL"])
POLL_DELAY = 0.05  # arq's default is 0.5 s between polls of the queue
MAX_JOBS = 10  # arq's default; 100 and 1000 were slower here


async def noop(ctx: dict[str, Any], i: int) -> None:
    mark(i)


class WorkerSettings:
    functions = [noop]
    redis_settings = REDIS
    poll_delay = POLL_DELAY
    max_jobs = MAX_JOBS
