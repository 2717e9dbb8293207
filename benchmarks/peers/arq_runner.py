"""arq: `ArqRedis.enqueue_job` one by one (no bulk API); worker polling every 50 ms."""

from __future__ import annotations

from arq import create_pool
from arq.connections import ArqRedis

from benchmarks.peers.arq_app import MAX_JOBS, POLL_DELAY, REDIS
from benchmarks.peers.base import AsyncPeer, Context, bin_path


class ArqPeer(AsyncPeer):
    name = "arq"
    title = "arq"
    package = "arq"
    settings = (
        f"`arq WorkerSettings`, poll_delay={POLL_DELAY} s (default 0.5 s), "
        f"max_jobs={MAX_JOBS} (the default), async job, default keep_result"
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.pool: ArqRedis = self.run(create_pool(REDIS))

    async def aenqueue(self, i: int) -> None:
        await self.pool.enqueue_job("noop", i)

    def worker_argv(self) -> list[str]:
        return [bin_path("arq"), "benchmarks.peers.arq_app.WorkerSettings"]

    def pending(self) -> int:
        # A job stays in the `arq:queue` sorted set until it has finished.
        return int(self.redis.zcard("arq:queue"))

    async def aclose(self) -> None:
        await self.pool.aclose()
