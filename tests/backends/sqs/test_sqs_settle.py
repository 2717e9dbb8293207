"""SQS settles a batch of any mix of verdicts in one pass: the lease records of the whole
batch are checked in one call to the `locks=` store, then come the SQS calls. Counted by
the lock store's Redis server itself (INFO commandstats) and by a botocore hook."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tasuki.backends.base import Envelope, Settle
from tasuki.backends.urls import backend_from_url
from tasuki.core.message import ErrorInfo
from tasuki.testing.servers import MotoServer, RedisServer
from tests.backends.script_calls import script_calls
from tests.backends.sqs.support import requests_counted
from tests.support.deps import need

need("boto3")

from tasuki.backends.sqs import SqsBackend  # noqa: E402


@pytest.fixture
def backend(sqs_server: MotoServer, counted_redis: RedisServer) -> Iterator[SqsBackend]:
    url = (
        f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix=s{uuid.uuid4().hex[:10]}-"
        f"&locks={counted_redis.url()}"
    )
    b = backend_from_url(url)
    assert isinstance(b, SqsBackend)
    yield b
    b.close()


def test_a_mixed_batch_checks_its_records_once(backend: SqsBackend) -> None:
    """An ack, a retry and a dead letter: one records call for the three leases, one to
    keep the acked id, one to note the dead letter for `inspect`, one to drop the three
    from the in-flight listing and one to list the dead letter; the SQS calls are one
    per kind (delete; visibility; send and delete of the move)."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    backend.enqueue([Envelope(queue, f"m{i}", b"x", keep_id=60.0) for i in range(3)])
    leased: list[Any] = []
    while len(leased) < 3:
        leased += backend.lease(queue, 3 - len(leased), 30.0, wait=1.0)
    by_id = {d.id: d for d in leased}
    error = ErrorInfo("ValueError", "bad", "Traceback ...")
    items = [
        Settle.ack(by_id["m0"].receipt),
        Settle.release(by_id["m1"].receipt, 0.0, penalty=True, error=error),
        Settle.dead(by_id["m2"].receipt, "gave up", error),
    ]
    calls = requests_counted(backend)
    store: Any = backend.sqs.lock_backend
    before = script_calls(store._command)
    assert backend.settle(items) == [True, True, True]
    assert script_calls(store._command) - before == 5
    assert calls == {
        "DeleteMessageBatch": 2,
        "ChangeMessageVisibilityBatch": 1,
        "SendMessageBatch": 1,
    }
    assert backend.settle(items) == [False, False, False]  # stale now: refused by records
    assert backend.enqueue([Envelope(queue, "m0", b"x")])[0].status == "duplicate"
    [again] = backend.lease(queue, 3, 30.0, wait=2.0)
    assert (again.id, again.attempt) == ("m1", 2)
    assert backend.ack([again.receipt]) == [True]
