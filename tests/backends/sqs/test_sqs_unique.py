"""Enqueue-time uniqueness on SQS: the key is claimed in the `locks=` store just before
the send, as a pending claim (PENDING_CLAIM seconds), and given the claim's TTL once
the message is sent. On either lock store: `locks=sqlite://` and `locks=redis://`."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

import tasuki
from tasuki.backends.base import UniqueClaim
from tasuki.backends.urls import backend_from_url
from tasuki.errors import ConfigurationError
from tasuki.testing.contract.helpers import env
from tests.support.deps import need

need("boto3")

from tasuki.backends.sqs import SqsBackend  # noqa: E402
from tasuki.backends.sqs.backend import PENDING_CLAIM  # noqa: E402


@pytest.fixture
def key() -> str:
    """A lock key of its own (the Redis lock store is the session's server)."""
    return f"{{q}}unique:{uuid.uuid4().hex}"


def test_the_claim_is_pending_until_the_message_is_sent(locked_url: str, key: str) -> None:
    backend = backend_from_url(locked_url)
    assert isinstance(backend, SqsBackend)
    seen: list[float] = []
    send = backend.sqs.send

    def watched(url: str, entries: list[dict[str, Any]]) -> list[str]:
        holder = backend.locks.holder(key)
        assert holder is not None and holder.owner == "a"
        seen.append(holder.expires_in)
        return send(url, entries)

    backend.sqs.send = watched  # type: ignore[method-assign]
    try:
        claim = UniqueClaim(key, 3600.0)
        assert backend.enqueue([env("q", "a", unique=claim)])[0] == ("a", "enqueued")
        # While the send was under way the claim would lapse by itself, soon.
        assert 0 < seen[0] <= PENDING_CLAIM
        holder = backend.locks.holder(key)
        assert holder is not None and holder.owner == "a"
        assert holder.expires_in > 3500  # confirmed: the claim's TTL
        assert backend.enqueue([env("q", "b", unique=claim)])[0] == ("a", "conflict")
    finally:
        backend.close()


def test_a_failed_send_gives_the_claim_back(locked_url: str, key: str) -> None:
    backend = backend_from_url(locked_url)
    assert isinstance(backend, SqsBackend)

    def refused(url: str, entries: list[dict[str, Any]]) -> list[str]:
        raise RuntimeError("the network is down")

    send = backend.sqs.send
    backend.sqs.send = refused  # type: ignore[method-assign]
    try:
        claim = UniqueClaim(key, 3600.0)
        with pytest.raises(RuntimeError):
            backend.enqueue([env("q", "a", unique=claim)])
        assert backend.locks.holder(key) is None
        backend.sqs.send = send  # type: ignore[method-assign]
        assert backend.enqueue([env("q", "b", unique=claim)])[0] == ("b", "enqueued")
    finally:
        backend.close()


def test_a_claim_shorter_than_the_pending_time_keeps_its_ttl(locked_url: str, key: str) -> None:
    backend = backend_from_url(locked_url)
    try:
        backend.enqueue([env("q", "a", unique=UniqueClaim(key, 2.0))])
        holder = backend.locks.holder(key)
        assert holder is not None and holder.expires_in <= 2.0
    finally:
        backend.close()


def test_replace_is_refused_naming_why(locked_url: str) -> None:
    app = tasuki.App(locked_url)
    try:
        with pytest.raises(ConfigurationError, match="SQS cannot change a waiting message"):
            app.job(unique=tasuki.Unique(mode="until_executing", on_conflict="replace"))(
                lambda: None
            )
    finally:
        app.close()


def test_until_and_while_executing_a_runs_b_waits_c_dropped(locked_url: str) -> None:
    """The Sidekiq-style scenario, on either lock store: A runs, B (enqueued while A
    runs) waits, C conflicts with the waiting B and is dropped; A then B, never both."""
    app = tasuki.App(locked_url)
    runs: list[tuple[str, float, float]] = []
    started = threading.Event()

    name = uuid.uuid4().hex

    @app.job(unique=tasuki.Unique(mode="until_and_while_executing", key=lambda m: name))
    def task(value: str) -> None:
        began = time.monotonic()
        started.set()
        time.sleep(2.0)
        runs.append((value, began, time.monotonic()))

    worker = app.worker(concurrency=3)
    worker.start()
    try:
        task.enqueue("A")
        assert started.wait(10)
        time.sleep(0.1)  # A holds the execution lock now
        b = task.enqueue("B")
        assert task.enqueue("C") == b
        deadline = time.monotonic() + 20
        while len(runs) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop(grace=5)
        app.close()
    assert [v for v, _, _ in sorted(runs, key=lambda r: r[1])] == ["A", "B"]
    (_, _, a_end), (_, b_start, _) = sorted(runs, key=lambda r: r[1])
    assert b_start >= a_end
