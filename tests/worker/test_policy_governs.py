"""The job's declared retry policy governs its messages, whoever enqueued them and
whatever limit they stamped: for exceptions and for crash loops alike."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import tasuki
from tasuki.backends.base import Envelope
from tasuki.core.message import JOB_HEADER
from tests.support.processes import env_with_src


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    app = tasuki.App(any_url)
    yield app
    app.close()


def declare(app: tasuki.App, runs: list[int]) -> None:
    @app.job(retry=tasuki.Retry(max_attempts=2, backoff=tasuki.constant(0.0)))
    def fragile() -> None:
        runs.append(tasuki.current().attempt)
        raise RuntimeError("always")

    @app.consumer("raw", retry=tasuki.Retry(max_attempts=2, backoff=tasuki.constant(0.0)))
    def raw(message: tasuki.Message) -> None:
        runs.append(message.attempt)
        raise RuntimeError("always")


def stored_by_another_service(app: tasuki.App, job: str | None, queue: str) -> None:
    headers = {JOB_HEADER: job} if job else {}
    body = app.codec.encode_payload(job, (), {}) if job else b"{}"
    app.backend.enqueue([Envelope(queue, "m-1", body, headers, max_attempts=10)])


def test_another_producer_stamped_ten(app: tasuki.App) -> None:
    runs: list[int] = []
    declare(app, runs)
    stored_by_another_service(app, "fragile", "default")
    app.worker(queues=["default"], concurrency=2).run(until_idle=True, timeout=20)
    assert runs == [1, 2]
    (dead,) = app.dead_letters("default")
    assert dead.reason == "retries exhausted after 2 attempts"


def test_send_from_an_app_without_the_consumer(app: tasuki.App, any_url: str) -> None:
    runs: list[int] = []
    declare(app, runs)
    producer = tasuki.App(any_url, backend=app.backend)  # knows no consumer
    producer.send("raw", b"{}")
    app.worker(queues=["raw"], concurrency=2).run(until_idle=True, timeout=20)
    assert runs == [1, 2]


def test_a_crash_loop_ends_at_the_jobs_own_limit(app: tasuki.App) -> None:
    runs: list[int] = []
    declare(app, runs)
    stored_by_another_service(app, "fragile", "default")
    step = app.backend.capabilities.timer_resolution  # the shortest lease it keeps
    for _ in range(2):  # two workers died holding it: their leases lapse
        (leased,) = app.backend.lease("default", 1, visibility_timeout=0.05)
        time.sleep(max(0.1, step + 0.1))
    assert leased.attempt == 2
    app.worker(queues=["default"], concurrency=2).run(until_idle=True, timeout=20)
    assert runs == []
    (dead,) = app.dead_letters("default")
    assert dead.reason == "lease expired 2 times"


def test_a_higher_limit_than_stamped_is_honoured(app: tasuki.App) -> None:
    runs: list[int] = []

    @app.job(retry=tasuki.Retry(max_attempts=4, backoff=tasuki.constant(0.0)))
    def patient() -> None:
        runs.append(tasuki.current().attempt)
        raise RuntimeError("always")

    producer = tasuki.App(backend=app.backend)
    producer.send(
        "default", app.codec.encode_payload("patient", (), {}), headers={JOB_HEADER: "patient"}
    )
    app.worker(queues=["default"], concurrency=2).run(until_idle=True, timeout=20)
    assert runs == [1, 2, 3, 4]


def test_cli_enqueue_with_url(sqlite_url: str) -> None:
    app = tasuki.App(sqlite_url)
    runs: list[int] = []
    declare(app, runs)
    result = subprocess.run(
        [sys.executable, "-m", "tasuki", "enqueue", "fragile", "--url", sqlite_url],
        capture_output=True,
        text=True,
        env=env_with_src(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    app.worker(queues=["default"], concurrency=2).run(until_idle=True, timeout=20)
    assert runs == [1, 2]
    app.close()
