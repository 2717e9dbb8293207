"""The raw redis-py floor: RPUSH to enqueue, one batched Lua fetch+ack loop to consume."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.peers.base import SyncPeer, python_argv
from benchmarks.peers.raw_worker import BATCH, INFLIGHT, READY, encode


class RawPeer(SyncPeer):
    name = "raw-redis"
    title = "raw redis-py floor"
    package = "redis"
    has_bulk = True
    settings = (
        f"one thread: Lua ack-previous + LPOP {BATCH} + ZADD lease per round trip, "
        "orjson bodies; RPUSH to enqueue"
    )

    def enqueue(self, i: int) -> None:
        self.redis.rpush(READY, encode(i))

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        self.redis.rpush(READY, *(encode(i) for i in indices))

    def worker_argv(self) -> list[str]:
        return python_argv("-m", "benchmarks.peers.raw_worker", self.ctx.redis_url, BATCH)

    def pending(self) -> int:
        return int(self.redis.llen(READY)) + int(self.redis.zcard(INFLIGHT))
