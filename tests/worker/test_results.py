"""Results as a caller sees them (DESIGN §4b): the value, or one of three different
answers — `JobFailed`, `ResultTimeout`, `ResultMissing` (at once) — on every backend
with the results capability; refused at declaration on the others."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tasuki
from tasuki.errors import (
    ConfigurationError,
    InvalidArgument,
    JobFailed,
    ResultMissing,
    ResultTimeout,
)


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    app = tasuki.App(any_url)
    yield app
    app.close()


@pytest.fixture
def worker(app: tasuki.App) -> Iterator[Any]:
    if not app.backend.capabilities.results:
        pytest.skip(f"{app.backend.url.split(':', 1)[0]}:// lacks the results capability")
    w = app.worker(concurrency=4)
    w.start()
    yield w
    w.stop(grace=5.0)


def test_the_return_value_by_job_and_by_queue(app: tasuki.App, worker: Any) -> None:
    @app.job(keep_result=60.0)
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    mid = add.enqueue(1, 2)
    assert add.result(mid, timeout=10.0) == {"sum": 3}
    assert app.result("default", mid, timeout=0) == {"sum": 3}
    assert asyncio.run(add.result_async(mid, timeout=1.0)) == {"sum": 3}


def test_a_dead_lettered_run_answers_job_failed_with_its_error(
    app: tasuki.App, worker: Any
) -> None:
    @app.job(keep_result=60.0, retry=tasuki.Retry(max_attempts=1))
    def charge(card: str) -> None:
        raise RuntimeError(f"card {card} declined")

    mid = charge.enqueue("4242")
    with pytest.raises(JobFailed) as failed:
        charge.result(mid, timeout=10.0)
    assert failed.value.error.type == "RuntimeError"
    assert failed.value.error.message == "card 4242 declined"
    assert failed.value.message_id == mid
    assert "card 4242 declined" in str(failed.value)


def test_a_waiting_message_times_out_and_an_unknown_id_is_missing_at_once(
    app: tasuki.App, worker: Any
) -> None:
    gate = threading.Event()

    @app.job(keep_result=60.0)
    def slow() -> str:
        gate.wait(10)
        return "done"

    @app.job
    def forgetful() -> str:
        return "not kept"

    mid = slow.enqueue()
    began = time.monotonic()
    with pytest.raises(ResultTimeout):
        slow.result(mid, timeout=0.3)
    assert 0.25 <= time.monotonic() - began < 5.0
    began = time.monotonic()
    with pytest.raises(ResultMissing):
        slow.result("no-such-message-id", timeout=30.0)
    assert time.monotonic() - began < 1.0, "an unknown id must be answered at once"
    gate.set()
    assert slow.result(mid, timeout=10.0) == "done"

    kept_not = forgetful.enqueue()
    tasuki_wait(app, kept_not)
    with pytest.raises(ResultMissing):
        forgetful.result(kept_not, timeout=5.0)


def test_the_result_expires_with_its_ttl(app: tasuki.App, worker: Any) -> None:
    @app.job(keep_result=0.5)
    def brief() -> int:
        return 7

    mid = brief.enqueue()
    assert brief.result(mid, timeout=10.0) == 7
    time.sleep(1.0)
    with pytest.raises(ResultMissing):
        brief.result(mid, timeout=0)


def test_a_return_value_that_is_not_json_is_a_dead_letter_with_its_reason(
    app: tasuki.App, worker: Any
) -> None:
    @app.job(keep_result=60.0)
    def opaque() -> object:
        return object()

    mid = opaque.enqueue()
    with pytest.raises(JobFailed) as failed:
        opaque.result(mid, timeout=10.0)
    assert failed.value.error.type == "SerializationError"
    assert "cannot be kept as JSON" in str(failed.value)
    assert len(app.dead_letters()) == 1


def test_async_waiting_leaves_the_event_loop_free(app: tasuki.App, worker: Any) -> None:
    gate = threading.Event()

    @app.job(keep_result=60.0)
    def later() -> int:
        gate.wait(10)
        return 1

    async def main() -> tuple[int, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        mid = later.enqueue()
        asyncio.get_running_loop().call_later(0.3, gate.set)
        value = await later.result_async(mid, timeout=10.0)
        ticker.cancel()
        return value, ticks

    value, ticks = asyncio.run(main())
    assert value == 1
    assert ticks >= 10, "the event loop was blocked while waiting"


def test_keep_result_is_checked_at_declaration(app: tasuki.App) -> None:
    with pytest.raises(InvalidArgument):
        app.job(keep_result=-1)(lambda: None)
    if app.backend.capabilities.results:
        return
    with pytest.raises(ConfigurationError, match="results"):

        @app.job(keep_result=60.0)
        def kept() -> int:
            return 1

    with pytest.raises(ConfigurationError, match="results"):
        app.result("default", "some-id", timeout=0)


def tasuki_wait(app: tasuki.App, mid: str) -> None:
    """Until the message was acked (its id is no longer waiting or running)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if app.stats()["ready"] == 0 and app.stats()["in_flight"] == 0:
            return
        time.sleep(0.02)
    raise AssertionError(f"message {mid} did not finish")
