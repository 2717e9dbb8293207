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


@app.task(name="noop")
def noop(i: int) -> None:
    mark(i)


@app.task(name="shape")
def shape(i: int) -> None:
    run(i)
