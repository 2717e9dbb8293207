"""Priorities on SQS: one SQS queue per level in use (level 0 is the queue itself), the
lease asking the higher levels first. What the contract cannot see: the queues created,
what each lease costs in requests, and that every operation finds every level."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tasuki.backends.base import Settle
from tasuki.core.message import ErrorInfo
from tasuki.errors import ConfigurationError
from tasuki.testing.contract.helpers import env, stats
from tasuki.testing.servers import MotoServer
from tests.backends.sqs.support import opened, requests_counted
from tests.support.deps import need

need("boto3")

from tasuki.backends.sqs import SqsBackend  # noqa: E402


@pytest.fixture
def sqs_url(sqs_server: MotoServer, tmp_path: Path) -> str:
    return (
        f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix=s{uuid.uuid4().hex[:10]}-"
        f"&locks=sqlite:///{tmp_path / 'locks.db'}"
    )


@pytest.fixture
def sqs(sqs_url: str) -> Iterator[SqsBackend]:
    backend = opened(sqs_url)
    yield backend
    backend.close()


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def _sqs_queues(backend: SqsBackend) -> list[str]:
    urls = backend.sqs.client.list_queues(QueueNamePrefix=backend.sqs.options.prefix)
    return sorted(url.rsplit("/", 1)[-1] for url in urls.get("QueueUrls", []))


def _order(backend: SqsBackend, queue: str) -> list[str]:
    out = []
    while batch := backend.lease(queue, 1, 30.0):
        out.append(batch[0].id)
        backend.settle([Settle.ack(batch[0].receipt)])
    return out


@pytest.mark.parametrize("suffix", ["", ".fifo"])
def test_each_level_in_use_is_an_sqs_queue_sharing_the_dead_letter_queue(
    sqs: SqsBackend, queue: str, suffix: str
) -> None:
    name = queue + suffix
    sqs.enqueue([env(name, f"m{p}", priority=p) for p in (0, 3, 9)])
    p = sqs.sqs.options.prefix
    assert _sqs_queues(sqs) == sorted(
        p + queue + part + suffix for part in ("", "-dead", "-p3", "-p9")
    )
    assert sqs.queues() == [name]
    dead_arn = sqs.sqs.client.get_queue_attributes(
        QueueUrl=sqs.sqs.info(name).dead_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    for level in (3, 9):
        attrs = sqs.sqs.client.get_queue_attributes(
            QueueUrl=sqs.sqs.info(name, level).url, AttributeNames=["All"]
        )["Attributes"]
        assert orjson.loads(attrs["RedrivePolicy"])["deadLetterTargetArn"] == dead_arn
    assert _order(sqs, name) == ["m9", "m3", "m0"]


def test_a_queue_without_priorities_costs_what_it_did(sqs: SqsBackend, queue: str) -> None:
    """One level: no level queue is created, and a lease is the receives it always was
    (one ListQueues a minute finds levels other processes created)."""
    sqs.enqueue([env(queue, n) for n in range(30)])
    calls = requests_counted(sqs)
    for _ in range(3):
        assert len(sqs.lease(queue, 10, 30.0)) == 10
    assert sqs.lease(queue, 10, 30.0) == []
    assert calls == Counter({"ReceiveMessage": 4, "ListQueues": 1}), calls
    assert len(_sqs_queues(sqs)) == 2  # the queue and its dead-letter queue


def test_with_levels_a_lease_asks_from_the_highest_down(sqs: SqsBackend, queue: str) -> None:
    """A batch filled by the higher level costs one receive; one filled lower costs one
    receive more per level above it (each asked first, found empty)."""
    sqs.enqueue([env(queue, f"hi{n}", priority=5) for n in range(10)])
    sqs.enqueue([env(queue, f"lo{n}", priority=0) for n in range(10)])
    calls = requests_counted(sqs)
    high = sqs.lease(queue, 10, 30.0)
    assert sorted(d.id for d in high) == [f"hi{n}" for n in range(10)]
    assert calls["ReceiveMessage"] == 1, calls
    low = sqs.lease(queue, 10, 30.0)
    assert sorted(d.id for d in low) == sorted(f"lo{n}" for n in range(10))
    assert calls["ReceiveMessage"] == 1 + 2, calls


def test_another_process_finds_the_levels(sqs_url: str, queue: str) -> None:
    producer, worker = opened(sqs_url), opened(sqs_url)
    try:
        worker.enqueue([env(queue, "low")])
        producer.enqueue([env(queue, "urgent", priority=7)])
        assert worker.lease(queue, 1, 30.0)[0].id == "urgent"
    finally:
        producer.close()
        worker.close()


def test_a_level_message_settles_on_its_own_sqs_queue(sqs: SqsBackend, queue: str) -> None:
    sqs.enqueue([env(queue, "p4", priority=4), env(queue, "p0")])
    [d] = sqs.lease(queue, 1, 30.0)
    assert d.id == "p4"
    assert sqs.extend([d.receipt], 60.0) == [True]
    assert sqs.settle([Settle.release(d.receipt, 0.0, penalty=True)]) == [True]
    [again] = sqs.lease(queue, 1, 30.0)
    assert (again.id, again.attempt) == ("p4", 2)
    assert sqs.settle([Settle.release(again.receipt, 0.0, penalty=False)]) == [True]
    [third] = sqs.lease(queue, 1, 30.0)
    assert (third.id, third.attempt) == ("p4", 2)  # the hand-back gave its attempt back
    assert sqs.settle([Settle.ack(third.receipt)]) == [True]
    assert _order(sqs, queue) == ["p0"]
    assert stats(sqs, queue) == (0, 0, 0, 0)


def test_stats_dead_letters_redrive_and_purge_see_every_level(sqs: SqsBackend, queue: str) -> None:
    sqs.enqueue([env(queue, f"a{n}") for n in range(2)])
    sqs.enqueue([env(queue, f"b{n}", priority=6) for n in range(3)])
    assert stats(sqs, queue) == (5, 0, 0, 0)
    [d] = sqs.lease(queue, 1, 30.0)
    assert d.id.startswith("b")
    sqs.settle([Settle.dead(d.receipt, "failed", ErrorInfo("E", "bad", ""))])
    assert [letter.id for letter in sqs.dead_letters(queue)] == [d.id]
    assert sqs.redrive(queue) == 1
    assert stats(sqs, queue)[0] == 5
    # Back at its level: ahead of the level-0 messages.
    assert set(_order(sqs, queue)[:3]) == {"b0", "b1", "b2"}
    sqs.enqueue([env(queue, "c0"), env(queue, "c1", priority=2)])
    assert sqs.purge(queue) == 2
    assert stats(sqs, queue) == (0, 0, 0, 0)


def test_a_queue_named_like_a_level_is_refused(sqs: SqsBackend, queue: str) -> None:
    with pytest.raises(ConfigurationError, match="priority levels"):
        sqs.enqueue([env(f"{queue}-p3", "x")])


def test_an_old_low_message_gets_ahead_of_a_busy_higher_level(sqs: SqsBackend, queue: str) -> None:
    """Aging: a level-0 message reaches the front after about 9 periods behind a level
    9 that never empties (the lease's estimate of its wait: levels.py)."""
    sqs.priority_aging = 0.2
    start = time.monotonic()
    sqs.enqueue([env(queue, "old")])
    sqs.enqueue([env(queue, "busy-0", priority=9)])
    n = 0
    while time.monotonic() - start < 10:
        n += 1
        sqs.enqueue([env(queue, f"busy-{n}", priority=9)])
        [d] = sqs.lease(queue, 1, 30.0)
        sqs.settle([Settle.ack(d.receipt)])
        if d.id == "old":
            break
    waited = time.monotonic() - start
    assert d.id == "old"
    assert 9 * 0.2 - 0.05 <= waited < 9 * 0.2 + 2.0, waited  # SentTimestamp: ms
