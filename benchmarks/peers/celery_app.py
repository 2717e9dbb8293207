"""Celery's side: a Redis broker, no result backend, the no-op task."""

from __future__ import annotations

import os

from celery import Celery

from benchmarks.marks import mark
from benchmarks.shape_jobs import run

app = Celery("bench", broker=os.environ["BENCH_REDIS_URL"])
app.conf.update(
    task_ignore_result=True,  # no result backend: nothing but the broker is measured
    worker_prefetch_multiplier=32,  # prefetch = multiplier x concurrency
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    task_serializer="json",
    accept_content=["json"],
)
#: shape io50: the broker's connections at 256 threads or 1,024 greenlets. Celery's docs:
#: `broker_pool_limit` (default 10) bounds the producer/consumer pool, kombu's Redis
#: transport its own pool (`max_connections`, default 10) and `redis_max_connections`
#: the result backend's (none here); set to the concurrency, as its users are told to for
#: the eventlet/gevent pools. Unset, Celery's defaults.
POOL = int(os.environ.get("BENCH_CELERY_POOL", "0"))
if POOL:
    app.conf.update(
        broker_pool_limit=POOL,
        redis_max_connections=POOL,
        broker_transport_options={"max_connections": POOL},
    )


@app.task(name="noop")
def noop(i: int) -> None:
    mark(i)


@app.task(name="shape")
def shape(i: int) -> None:
    run(i)
