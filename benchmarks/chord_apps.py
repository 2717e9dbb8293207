"""The two sides of `benchmarks.chord`: a chord of no-op members and a callback that
writes down when it ran, in tasuki (any URL) and in Celery (Redis broker and results).

The callback sets the Redis key `chord:done:<run>` to the time it ran and how many
results it was given; the harness polls that key.
"""

from __future__ import annotations

import os
import time

import redis


def _redis_url() -> str:
    return os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


_marks: list[redis.Redis] = []


def _done(run: str, results: list[int]) -> None:
    if not _marks:
        _marks.append(redis.Redis.from_url(_redis_url()))
    _marks[0].set(f"chord:done:{run}", f"{time.time()} {len(results)} {sum(results)}")


def tasuki_app() -> object:
    import tasuki

    app = tasuki.App(os.environ.get("BENCH_TASUKI_URL", "memory://"))

    @app.job(name="member")
    def member(i: int) -> int:
        return i

    @app.job(name="callback")
    def callback(results: list[int], run: str) -> None:
        _done(run, results)

    return app


def celery_app() -> object:
    from celery import Celery

    app = Celery("chord", broker=_redis_url(), backend=_redis_url())
    app.conf.update(
        worker_prefetch_multiplier=32,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_expires=600,
    )

    @app.task(name="member")
    def member(i: int) -> int:
        return i

    @app.task(name="callback")
    def callback(results: list[int], run: str) -> None:
        _done(run, results)

    return app


if os.environ.get("BENCH_CHORD_SIDE") == "tasuki":
    app = tasuki_app()
elif os.environ.get("BENCH_CHORD_SIDE") == "celery":
    app = celery_app()
