"""Taskiq's side: taskiq-redis brokers (stream broker with acks by default), no result
backend, the no-op coroutine. `BENCH_TASKIQ_BROKER=list` picks the BRPOP list broker."""

from __future__ import annotations

import os

from taskiq import AsyncBroker
from taskiq_redis import ListQueueBroker, RedisStreamBroker

from benchmarks.marks import mark
from benchmarks.shape_jobs import arun

URL = os.environ["BENCH_REDIS_URL"]
KIND_ENV = "BENCH_TASKIQ_BROKER"
QUEUE = "bench"
XREAD_COUNT = 100  # taskiq-redis's default batch per XREADGROUP


#: connections in the broker's pool (shape io50: every task's XACK takes one at once);
#: unset, redis-py's default of 100. taskiq-redis's own knob, `max_connection_pool_size`.
POOL = int(os.environ.get("BENCH_TASKIQ_POOL", "0")) or None


def make_broker(kind: str) -> AsyncBroker:
    if kind == "list":
        return ListQueueBroker(URL, queue_name=QUEUE, max_connection_pool_size=POOL)
    # consumer_id "0": the group sees messages queued before the worker first started.
    return RedisStreamBroker(
        URL,
        queue_name=QUEUE,
        consumer_id="0",
        xread_count=XREAD_COUNT,
        max_connection_pool_size=POOL,
    )


broker = make_broker(os.environ.get(KIND_ENV, "stream"))


@broker.task(task_name="noop")
async def noop(i: int) -> None:
    mark(i)


@broker.task(task_name="shape")
async def shape(i: int) -> None:
    await arun(i)
