"""How the fetchers share a worker's slots."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import tasuki


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    app = tasuki.App(any_url)
    yield app
    app.close()


def test_fewer_slots_than_queues_still_serves_every_queue(app: tasuki.App) -> None:
    """With one slot and two queues, an idle queue's fetcher must not keep the slot from
    the other: a job enqueued into the second queue by a job of the first runs, and the
    worker goes idle right after."""
    ran: list[str] = []

    @app.job(queue="a")
    def first() -> None:
        ran.append("first")
        second.enqueue()

    @app.job(queue="b")
    def second() -> None:
        ran.append("second")

    first.enqueue()
    started = time.monotonic()
    app.worker(queues=["a", "b"], concurrency=1).run(until_idle=True, timeout=20)
    assert ran == ["first", "second"]
    assert time.monotonic() - started < 10
