"""Dramatiq's side: RedisBroker with its default middleware, the no-op actor."""

from __future__ import annotations

import os

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from benchmarks.marks import mark
from benchmarks.shape_jobs import run

#: connections in each process's pool (shape io50: every worker thread acks through it,
#: plus the consumer's fetches); unset, redis-py's default of 100. Dramatiq passes extra
#: `RedisBroker` keywords to redis-py, so `max_connections=` is how its users raise it.
POOL = int(os.environ.get("BENCH_DRAMATIQ_POOL", "0"))
_url = os.environ["BENCH_REDIS_URL"]
broker = (
    RedisBroker(connection_pool=redis.ConnectionPool.from_url(_url, max_connections=POOL))
    if POOL
    else RedisBroker(url=_url)
)
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="default", actor_name="noop")
def noop(i: int) -> None:
    mark(i)


@dramatiq.actor(queue_name="default", actor_name="shape")
def shape(i: int) -> None:
    run(i)
