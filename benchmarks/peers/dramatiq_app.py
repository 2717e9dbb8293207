"""Dramatiq's side: RedisBroker with its default middleware, the no-op actor."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from benchmarks.marks import mark
from benchmarks.shape_jobs import run

broker = RedisBroker(url=os.environ["BENCH_REDIS_URL"])
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="default", actor_name="noop")
def noop(i: int) -> None:
    mark(i)


@dramatiq.actor(queue_name="default", actor_name="shape")
def shape(i: int) -> None:
    run(i)
