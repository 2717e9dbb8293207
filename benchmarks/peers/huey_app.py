"""Huey's side: RedisHuey (blocking BRPOP dequeue), results off, the no-op task."""

from __future__ import annotations

import os

from huey import RedisHuey

from benchmarks.marks import mark
from benchmarks.shape_jobs import run

huey = RedisHuey(
    "bench",
    url=os.environ["BENCH_REDIS_URL"],
    results=False,  # nothing reads results: don't store them
    blocking=True,  # BRPOP instead of polling with backoff (Huey's default too)
)


@huey.task(name="noop")
def noop(i: int) -> None:
    mark(i)


@huey.task(name="shape")
def shape(i: int) -> None:
    run(i)
