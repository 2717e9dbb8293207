"""What the SQS backend adds to the contract: hops, refunds, raw messages, queue checks,
request counts. Run against the local SQS-compatible server (`moto_server`)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

import tasuki
from tasuki.backends.base import Envelope, Settle
from tasuki.backends.urls import backend_from_url
from tasuki.core.message import GROUP_HEADER
from tasuki.errors import InvalidArgument, MessageTooLarge
from tasuki.testing.contract.helpers import env, stats
from tasuki.testing.servers import MotoServer
from tests.backends.sqs.support import local_url, opened, redis_locks_url, requests_counted
from tests.support.deps import need

need("boto3")

from tasuki.backends.sqs import SqsBackend  # noqa: E402
from tasuki.backends.sqs.queues import QueueInfo  # noqa: E402


@pytest.fixture
def sqs_url(sqs_server: MotoServer, tmp_path: Path) -> str:
    return local_url(sqs_server, tmp_path)


@pytest.fixture
def sqs(sqs_url: str) -> Iterator[SqsBackend]:
    backend = backend_from_url(sqs_url)
    assert isinstance(backend, SqsBackend)
    yield backend
    backend.close()


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def locked(locked_url: str) -> Iterator[SqsBackend]:
    """A backend on either batched lock store: `locks=sqlite://` or `locks=redis://`."""
    backend = opened(locked_url)
    yield backend
    backend.close()


def _receive_raw(
    backend: SqsBackend, queue: str, visibility: int = 30
) -> tuple[QueueInfo, dict[str, Any]]:
    """One message of `queue` as SQS hands it to a receive, not yet admitted: a test
    admits it (`_admit`) itself, e.g. after another receive of the same message."""
    info = backend.sqs.queues.get(queue)
    assert info is not None
    [raw] = backend.sqs.client.receive_message(
        QueueUrl=info.url,
        MaxNumberOfMessages=1,
        VisibilityTimeout=visibility,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
    )["Messages"]
    return info, raw


def test_deferred_twenty_times_still_gets_its_full_attempts(sqs: SqsBackend, queue: str) -> None:
    sqs.enqueue([env(queue, "d", max_attempts=3)])
    fences = []
    for _ in range(20):
        [d] = sqs.lease(queue, 1, 30.0)
        assert d.attempt == 1
        fences.append(d.fencing_token)
        assert sqs.settle([Settle.release(d.receipt, 0.0, penalty=False)]) == [True]
    assert fences == sorted(set(fences)), "fencing tokens only grow"
    for attempt in (1, 2, 3):
        [d] = sqs.lease(queue, 1, 30.0)
        assert d.attempt == attempt
        sqs.settle([Settle.release(d.receipt, 0.0, penalty=True)])
    assert sqs.lease(queue, 1, 30.0) == []
    [dead] = sqs.dead_letters(queue)
    assert (dead.id, dead.attempt) == ("d", 3)
    assert "attempts exhausted (3 of 3)" in dead.reason


def test_worker_defer_twenty_times_then_runs(sqs_url: str, queue: str) -> None:
    app = tasuki.App(sqs_url)
    runs: list[int] = []

    @app.job(queue=queue, retry=tasuki.Retry(max_attempts=2))
    def patient() -> None:
        runs.append(tasuki.current().attempt)
        if len(runs) <= 20:
            raise tasuki.Defer()

    patient.enqueue()
    app.worker(concurrency=2).run(until_idle=True, timeout=60)
    app.close()
    assert runs == [1] * 21


def test_delay_beyond_max_delay_hops_without_counting_attempts(
    sqs_server: MotoServer, tmp_path: Path, queue: str
) -> None:
    """Delays past `max_delay` (here 1 s, standing in for SQS's 15 minutes) are the
    runtime's hops: a `delay=`, an absolute `eta=` and a retry's long backoff each run
    on time, and the hops count no attempt."""
    app = tasuki.App(local_url(sqs_server, tmp_path, max_delay=1))
    assert app.backend.capabilities.max_delay == 1.0
    ran: dict[str, tuple[float, int]] = {}

    @app.job(queue=queue, retry=tasuki.Retry(max_attempts=3, backoff=tasuki.constant(2.5)))
    def later(name: str) -> None:
        attempt = tasuki.current().attempt
        if name == "retried" and attempt == 1:
            ran["failed"] = (time.time(), attempt)
            raise RuntimeError("once")
        ran[name] = (time.time(), attempt)

    started = time.time()
    later.options(delay=3.0).enqueue("delayed")
    later.options(eta=datetime.fromtimestamp(started + 3.0, tz=UTC)).enqueue("at")
    later.enqueue("retried")
    with pytest.raises(InvalidArgument, match="max_delay"):  # the backend alone: no hops
        app.backend.enqueue([env(queue, "far", delay=5.0)])
    worker = app.worker(queues=[queue], concurrency=4)
    worker.start()
    deadline = time.monotonic() + 20
    while len(ran) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    worker.stop(grace=5)
    app.close()
    assert sorted(ran) == ["at", "delayed", "failed", "retried"]
    # The receiver runs a message whose time is at most 0.5 s away (its HOP_SLACK); one
    # hop of max_delay alone would have run each a second after it was sent.
    assert ran["delayed"][0] - started >= 2.4 and ran["delayed"][1] == 1
    assert ran["at"][0] - started >= 2.4 and ran["at"][1] == 1
    assert ran["retried"][0] - ran["failed"][0] >= 1.9 and ran["retried"][1] == 2
    assert max(t for t, _ in ran.values()) - started < 12, "a hop overslept"


S3_EVENT = {
    "Records": [
        {
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": "us-east-1",
            "eventName": "ObjectCreated:Put",
            "s3": {
                "bucket": {"name": "uploads"},
                "object": {"key": "reports/2026+11/caf%C3%A9.csv", "size": 42},
            },
        }
    ]
}


def test_raw_s3_notification_reaches_a_consumer(sqs: SqsBackend, sqs_url: str, queue: str) -> None:
    # Sent the way S3 sends it: a plain JSON body, no tasuki attribute.
    info = sqs.sqs.queues.get(queue)
    assert info is not None
    sqs.sqs.client.send_message(QueueUrl=info.url, MessageBody=orjson.dumps(S3_EVENT).decode())
    app = tasuki.App(sqs_url)
    keys: list[str] = []

    @app.consumer(queue)
    def ingest(message: tasuki.Message) -> None:
        from urllib.parse import unquote_plus

        for record in message.json()["Records"]:
            keys.append(unquote_plus(record["s3"]["object"]["key"]))

    app.worker(concurrency=1).run(until_idle=True, timeout=30)
    app.close()
    assert keys == ["reports/2026 11/café.csv"]
    assert stats(sqs, queue) == (0, 0, 0, 0)


def test_raw_message_released_and_dead_lettered_keeps_its_body(sqs: SqsBackend, queue: str) -> None:
    info = sqs.sqs.queues.get(queue)
    assert info is not None
    sqs.sqs.client.send_message(QueueUrl=info.url, MessageBody="plain text")
    [d] = sqs.lease(queue, 1, 30.0)
    assert (d.body, dict(d.headers), d.attempt) == (b"plain text", {}, 1)
    sqs.settle([Settle.release(d.receipt, 0.0, penalty=False)])
    [again] = sqs.lease(queue, 1, 30.0)
    assert (again.id, again.body, again.attempt) == (d.id, b"plain text", 1)


def test_requests_per_message_well_under_one(sqs_url: str, queue: str) -> None:
    app = tasuki.App(sqs_url)
    backend = app.backend
    assert isinstance(backend, SqsBackend)
    calls = requests_counted(backend)
    done: list[int] = []

    @app.job(queue=queue)
    def work(n: int) -> None:
        done.append(n)

    total = 100
    work.enqueue_many([(n,) for n in range(total)])
    app.worker(concurrency=20).run(until_idle=True, timeout=60)
    app.close()
    assert sorted(done) == list(range(total))
    requests = sum(calls.values())
    processing = sum(calls[c] for c in ("ReceiveMessage", "DeleteMessageBatch"))
    print(f"requests per message: {requests / total:.2f} all, {processing / total:.2f} processing")
    assert calls["SendMessageBatch"] == 10  # enqueue: batches of 10
    assert processing / total <= 0.35, dict(calls)  # receives of 10, deletes in batches
    assert requests / total < 0.6, dict(calls)


def test_enqueue_sends_batches_of_ten(sqs: SqsBackend, queue: str) -> None:
    calls: Counter[str] = Counter()
    sqs.sqs.client.meta.events.register(
        "before-call.sqs.SendMessageBatch", lambda **_: calls.update(["send"])
    )
    results = sqs.enqueue([env(queue, i) for i in range(25)])
    assert [r.status for r in results] == ["enqueued"] * 25
    assert calls["send"] == 3


def test_message_size_checked_at_enqueue(sqs: SqsBackend, queue: str) -> None:
    with pytest.raises(MessageTooLarge, match="MaximumMessageSize"):
        sqs.enqueue([env(queue, "big", body=b"x" * 300_000)])
    # the refused message's id is not kept: the same id can be enqueued small
    assert sqs.enqueue([env(queue, "big", body=b"x")])[0].status == "enqueued"


def test_existing_queue_attributes_are_checked(
    sqs: SqsBackend, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = sqs.sqs.client
    prefix = sqs.sqs.options.prefix
    dead = client.create_queue(QueueName=prefix + queue + "-dead")["QueueUrl"]
    arn = client.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]
    policy = orjson.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 5})
    client.create_queue(
        QueueName=prefix + queue,
        Attributes={"MessageRetentionPeriod": "3600", "RedrivePolicy": policy.decode()},
    )
    with caplog.at_level(logging.WARNING, logger="tasuki.sqs"):
        sqs.enqueue([env(queue, "ok", max_attempts=4)])
    text = caplog.text
    assert "MessageRetentionPeriod=3600" in text
    assert "maxReceiveCount=5" in text
    with pytest.raises(InvalidArgument, match="redrive policy"):
        sqs.enqueue([env(queue, "too-many", max_attempts=5)])


def test_without_locks_the_missing_promises_are_declared(
    sqs_server: MotoServer, tmp_path: Path, queue: str
) -> None:
    backend = backend_from_url(local_url(sqs_server, tmp_path, locks=False))
    caps = backend.capabilities
    assert not caps.fencing and not caps.id_window and not caps.native_locks
    with pytest.raises(tasuki.errors.ConfigurationError, match="locks="):
        backend.locks.acquire("k", "me", 10.0)
    backend.enqueue([env(queue, "a")])
    [d] = backend.lease(queue, 1, 30.0)
    assert backend.ack([d.receipt]) == [True]
    backend.close()


def test_extend_past_the_sqs_limit_is_refused(sqs: SqsBackend, queue: str) -> None:
    sqs.enqueue([env(queue, "long")])
    [d] = sqs.lease(queue, 1, 30.0)
    assert sqs.capabilities.max_visibility == 43200.0
    assert sqs.extend([d.receipt], 600.0) == [True]
    # 12 hours from the first receive is SQS's ceiling: beyond it the extension fails
    assert sqs.extend([d.receipt], 43200.0) == [False]
    assert sqs.ack([d.receipt]) == [True]


def test_fifo_queue_round_trip(sqs: SqsBackend) -> None:
    queue = f"f-{uuid.uuid4().hex[:8]}.fifo"
    sqs.enqueue(
        [
            Envelope(queue, f"m{n}", f"{n}".encode(), headers={"tasuki-group": f"g{n % 2}"})
            for n in range(4)
        ]
    )
    got = []
    for _ in range(10):
        batch = sqs.lease(queue, 10, 30.0)
        got.extend(batch)
        sqs.ack([d.receipt for d in batch])
        if len(got) == 4:
            break
    assert sorted(d.id for d in got) == ["m0", "m1", "m2", "m3"]
    with pytest.raises(InvalidArgument, match="FIFO"):
        sqs.enqueue([Envelope(queue, "late", b"x", delay=5.0)])


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_fencing_and_id_window_on_either_lock_store(
    sqs_server: MotoServer, tmp_path: Path, request: pytest.FixtureRequest, store: str
) -> None:
    """The lease records and id window work on SQLite (batched table) and Redis (locks)."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    if store == "redis":
        url = redis_locks_url(request, sqs_server, tmp_path)
    else:
        url = local_url(sqs_server, tmp_path)
    backend = backend_from_url(url)
    assert backend.capabilities.fencing
    assert backend.enqueue([env(queue, "x", keep_id=60.0)])[0].status == "enqueued"
    assert backend.enqueue([env(queue, "x", keep_id=60.0)])[0].status == "duplicate"
    [old] = backend.lease(queue, 1, 1.0)
    time.sleep(1.1)
    [new] = backend.lease(queue, 1, 30.0)
    assert (new.attempt, new.fencing_token) == (2, 2)
    assert backend.ack([old.receipt]) == [False]
    assert backend.extend([old.receipt], 60.0) == [False]
    assert backend.settle([Settle.release(old.receipt, 0.0, penalty=False)]) == [False]
    assert backend.extend([new.receipt], 60.0) == [True]
    assert backend.ack([new.receipt]) == [True]
    assert backend.enqueue([env(queue, "x", keep_id=60.0)])[0].status == "duplicate"
    assert stats(backend, queue) == (0, 0, 0, 0)
    backend.close()


@pytest.mark.parametrize("wait", [0.25, 2.0])
def test_an_idle_worker_long_polls(sqs_url: str, queue: str, wait: float) -> None:
    """Idle, a worker's fetcher makes one short receive and one long poll per round; a
    wait under SQS's 1-second minimum becomes a 1-second long poll, never a loop of short
    polls. So an idle queue costs about 2 requests per max(1, wait) seconds."""
    app = tasuki.App(sqs_url)

    @app.job(queue=queue)
    def never() -> None:
        pass

    backend = app.backend
    assert isinstance(backend, SqsBackend)
    calls: Counter[str] = Counter()
    backend.sqs.client.meta.events.register(
        "before-call.sqs.ReceiveMessage", lambda **_: calls.update(["receive"])
    )
    started = time.monotonic()
    app.worker(concurrency=2, wait=wait).run(timeout=4.0)
    elapsed = time.monotonic() - started
    app.close()
    rounds = elapsed / max(1.0, wait)
    assert calls["receive"] <= 2 * rounds + 2, (calls, elapsed)


def test_job_group_option_sets_the_fifo_message_group(sqs_url: str) -> None:
    queue = f"g-{uuid.uuid4().hex[:8]}.fifo"
    app = tasuki.App(sqs_url)  # no middleware installed by hand: group= brings its own

    @app.job(queue=queue, group=lambda args, kwargs: f"customer-{args[0] % 2}")
    def charge(n: int) -> None:
        pass

    charge.enqueue_many([(n,) for n in range(4)])
    backend = app.backend
    assert isinstance(backend, SqsBackend)
    info = backend.sqs.queues.get(queue)
    assert info is not None
    got = backend.sqs.client.receive_message(
        QueueUrl=info.url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    )["Messages"]
    assert {m["Attributes"]["MessageGroupId"] for m in got} == {"customer-0", "customer-1"}
    app.close()


def test_fifo_groups_end_to_end(sqs_url: str) -> None:
    """Enqueue with `group=` (and the default: one group per job name) on a `.fifo`
    queue, run a worker, and see every message run once, in order within its group (one
    slot: a worker runs what it leased together side by side)."""
    queue = f"e-{uuid.uuid4().hex[:8]}.fifo"
    app = tasuki.App(sqs_url)
    runs: list[tuple[str, int, str | None]] = []

    @app.job(queue=queue, group=lambda args, kwargs: f"customer-{args[0] % 2}")
    def charge(n: int) -> None:
        runs.append(("charge", n, tasuki.current().message.headers.get(GROUP_HEADER)))

    @app.job(queue=queue)
    def refund(n: int) -> None:
        runs.append(("refund", n, tasuki.current().message.headers.get(GROUP_HEADER)))

    charge.enqueue_many([(n,) for n in range(6)])
    refund.enqueue_many([(n,) for n in range(3)])
    backend = app.backend
    assert isinstance(backend, SqsBackend)
    info = backend.sqs.queues.get(queue)
    assert info is not None and info.fifo
    app.worker(queues=[queue], concurrency=1).run(until_idle=True, timeout=30)
    app.close()
    expected = [("charge", n, f"customer-{n % 2}") for n in range(6)]
    expected += [("refund", n, None) for n in range(3)]  # the job's name is its group
    assert sorted(runs, key=str) == sorted(expected, key=str)
    for group in ([0, 2, 4], [1, 3, 5]):
        assert [n for job, n, _ in runs if job == "charge" and n in group] == group
    assert [n for job, n, _ in runs if job == "refund"] == [0, 1, 2]


def test_a_large_lease_keeps_several_receives_in_flight(sqs: SqsBackend, queue: str) -> None:
    sqs.enqueue([env(queue, f"m{n}") for n in range(30)])
    mutex = threading.Lock()
    now = [0]
    peak = [0]
    calls: Counter[str] = Counter()

    def before(**_: Any) -> None:
        with mutex:
            calls["receive"] += 1
            now[0] += 1
            peak[0] = max(peak[0], now[0])

    def after(**_: Any) -> None:
        with mutex:
            now[0] -= 1

    events = sqs.sqs.client.meta.events
    events.register("before-call.sqs.ReceiveMessage", before)
    events.register("after-call.sqs.ReceiveMessage", after)
    got = sqs.lease(queue, 30, 30.0)  # one receive, full: the other 20 asked for at once
    assert sorted(d.id for d in got) == sorted(f"m{n}" for n in range(30))
    assert peak[0] >= 2, "the receives went one after another"
    assert calls["receive"] <= 5
    assert sqs.ack([d.receipt for d in got]) == [True] * 30
    # An idle queue still costs one long poll, not one receive per 10 of room.
    calls.clear()
    assert sqs.lease(queue, 30, 30.0, wait=1.0) == []
    assert calls["receive"] == 1


def test_lease_records_on_redis_cost_one_call_per_batch(
    sqs_server: MotoServer, tmp_path: Path, request: pytest.FixtureRequest, queue: str
) -> None:
    """With `locks=redis://`, a batch of ten enqueues, leases, extensions or acks writes
    its id and lease records in one script call (two for acks: records and ids), and the
    console's in-flight listing in one more (leases, extensions, acks: one per queue of
    the batch), not one or two per message; counted by the Redis server itself (INFO
    commandstats)."""
    backend = backend_from_url(redis_locks_url(request, sqs_server, tmp_path))
    assert isinstance(backend, SqsBackend)
    store: Any = backend.sqs.lock_backend

    def commands() -> int:
        """Script calls so far (EVAL, EVALSHA): the commands scripts run count apart."""
        text = store._command("INFO", "commandstats")
        text = text.decode() if isinstance(text, bytes) else str(text)
        total = 0
        for line in text.splitlines():
            if line.startswith(("cmdstat_eval:", "cmdstat_evalsha:")):
                total += int(line.split("calls=", 1)[1].split(",", 1)[0])
        return total

    backend.enqueue([env(queue, "warm-up", keep_id=60.0)])  # connects (HELLO, INFO...)
    before = commands()
    backend.enqueue([env(queue, f"m{n}", keep_id=60.0) for n in range(10)])
    assert commands() - before == 1
    [warm] = backend.lease(queue, 1, 30.0)  # the first message sent comes first
    assert warm.id == "warm-up" and backend.ack([warm.receipt]) == [True]
    before = commands()
    got: list[Any] = []
    receives = 0
    while len(got) < 10:
        got += backend.lease(queue, 10 - len(got), 30.0)
        receives += 1
    # two calls per receive that found messages: the lease records, the listing
    assert commands() - before == 2 * receives
    before = commands()
    assert backend.extend([d.receipt for d in got], 60.0) == [True] * 10
    assert commands() - before == 2
    before = commands()
    assert backend.ack([d.receipt for d in got]) == [True] * 10
    assert commands() - before == 3
    assert backend.enqueue([env(queue, "m0", keep_id=60.0)])[0].status == "duplicate"
    backend.close()


def test_a_late_second_delivery_of_an_acked_message_does_not_run(
    sqs: SqsBackend, queue: str
) -> None:
    """Standard queues deliver at least once, and the local server hands one message to
    two racing receives: the copy whose lease is taken after the other's ack must not
    run. Here the second delivery is the same SQS message (same MessageId) under another
    receipt handle, admitted after the first was acked; a re-sent copy (a new MessageId,
    the same tasuki id) still runs."""
    sqs.enqueue([env(queue, "once")])
    info, raw = _receive_raw(sqs, queue)
    [first] = sqs.leasing._admit(info, [raw], 30.0)
    assert sqs.ack([first.receipt]) == [True]
    twin = {**raw, "ReceiptHandle": raw["ReceiptHandle"] + "-twin"}
    assert sqs.leasing._admit(info, [twin], 30.0) == []
    resent = {**twin, "MessageId": "another-sqs-message"}
    [again] = sqs.leasing._admit(info, [resent], 30.0)
    assert again.id == "once" and again.fencing_token > first.fencing_token


def test_duplicate_deliveries_do_not_run_with_redis_locks(
    sqs_server: MotoServer, tmp_path: Path, request: pytest.FixtureRequest, queue: str
) -> None:
    """The same promise on `locks=redis://` (its records are written by Lua scripts): a
    second delivery of one SQS message while its first lease is live, or after its ack,
    is refused; a re-sent copy (a new MessageId under the same tasuki id) still runs;
    an extension keeps the lease live past its first visibility timeout."""
    backend = backend_from_url(redis_locks_url(request, sqs_server, tmp_path))
    assert isinstance(backend, SqsBackend)
    try:
        backend.enqueue([env(queue, "once")])
        info, raw = _receive_raw(backend, queue)
        [first] = backend.leasing._admit(info, [raw], 1.0)
        twin = {**raw, "ReceiptHandle": raw["ReceiptHandle"] + "-twin"}
        assert backend.leasing._admit(info, [twin], 30.0) == []  # the first lease is live
        assert backend.extend([first.receipt], 30.0) == [True]
        time.sleep(1.2)  # past the first lease's own length: the extension holds it
        assert backend.leasing._admit(info, [twin], 30.0) == []
        assert backend.ack([first.receipt]) == [True]
        assert backend.leasing._admit(info, [twin], 30.0) == []  # the acked SQS message again
        resent = {**twin, "MessageId": "another-sqs-message", "ReceiptHandle": "r2"}
        [again] = backend.leasing._admit(info, [resent], 30.0)
        assert again.id == "once" and again.token == "r2"
        assert again.fencing_token > first.fencing_token  # the record keeps the number
    finally:
        backend.close()


def test_a_refused_duplicate_receive_is_not_an_attempt(locked: SqsBackend, queue: str) -> None:
    """SQS may hand one message to two racing receives, and counts both in its receive
    count; the lease store refuses the copy that comes second, and counts only the leases
    it granted: what runs is attempt 1 whichever receive's lease is recorded first, and
    the next deliveries (after a release, after a lapse) are attempts 2 and 3, with
    growing fencing numbers."""
    locked.enqueue([env(queue, "raced", max_attempts=5)])
    # The first receive leaves the message visible, so the second gets it too: two
    # real receives of one SQS message, counted 1 and 2 by the server.
    info, early = _receive_raw(locked, queue, visibility=0)
    _, late = _receive_raw(locked, queue, visibility=30)
    assert early["MessageId"] == late["MessageId"]
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in (early, late)] == ["1", "2"]
    [first] = locked.leasing._admit(info, [late], 1.0)  # the later receive's lease first
    assert locked.leasing._admit(info, [early], 30.0) == []  # the other: a duplicate, not run
    assert first.attempt == 1
    assert locked.settle([Settle.release(first.receipt, 0.0, penalty=True)]) == [True]
    [second] = locked.lease(queue, 1, 1.0, wait=2.0)  # the server's third receive
    assert second.attempt == 2 and second.fencing_token > first.fencing_token
    time.sleep(1.2)  # the lease lapses
    [third] = locked.lease(queue, 1, 30.0, wait=2.0)
    assert third.attempt == 3 and third.fencing_token > second.fencing_token
    assert locked.ack([third.receipt]) == [True]
    assert stats(locked, queue) == (0, 0, 0, 0)


def test_a_refused_duplicate_does_not_dead_letter_a_message_on_its_last_attempt(
    locked: SqsBackend, queue: str
) -> None:
    """A message with one attempt, handed to two racing receives: the receive counted 2
    is its first lease, not an exhausted one, so it runs instead of being dead-lettered
    while the other copy is refused."""
    locked.enqueue([env(queue, "last", max_attempts=1)])
    info, early = _receive_raw(locked, queue, visibility=0)
    _, late = _receive_raw(locked, queue, visibility=30)
    [only] = locked.leasing._admit(info, [late], 30.0)
    assert locked.leasing._admit(info, [early], 30.0) == []
    assert (only.id, only.attempt, only.max_attempts) == ("last", 1, 1)
    assert locked.ack([only.receipt]) == [True]
    assert stats(locked, queue) == (0, 0, 0, 0)


def test_a_refused_duplicate_comes_back_when_the_holders_lease_lapses(
    locked: SqsBackend, queue: str
) -> None:
    """A copy refused because another lease holds the message keeps the visibility its
    receive gave it: a worker's receive asks for far longer than a short job's own lease,
    so the message stayed hidden for that long after its holder had gone (a zombie, its
    store lease a little behind SQS's clock). It is made visible after the message's own
    visibility timeout instead, by when the holder's lease has lapsed."""
    locked.enqueue([env(queue, "short", visibility_timeout=1.0)])
    info, early = _receive_raw(locked, queue, visibility=0)
    _, late = _receive_raw(locked, queue, visibility=30)
    [held] = locked.leasing._admit(info, [early], 1.0)  # the holder, silent from here on
    assert locked.leasing._admit(info, [late], 30.0) == []  # refused, under a 30 s receive
    started = time.monotonic()
    [back] = locked.lease(queue, 1, 30.0, wait=5.0)
    assert back.id == "short" and back.fencing_token > held.fencing_token
    assert time.monotonic() - started < 4.0
    assert locked.ack([back.receipt]) == [True]


def test_an_acked_message_whose_delete_failed_is_deleted_when_met_again(
    locked: SqsBackend, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease record is settled before the SQS delete: when the delete fails (the
    server cut off just then), the message comes back though it was acked. It must not
    run, and it was left alone: hidden again and again until the record's 5 minutes of
    grace ran out, then run a second time. Met again, it is deleted."""
    locked.enqueue([env(queue, "once", visibility_timeout=1.0)])
    [first] = locked.lease(queue, 1, 1.0)
    with monkeypatch.context() as patched:
        patched.setattr(locked.sqs, "delete", lambda url, handles: [False] * len(handles))
        assert locked.settle([Settle.ack(first.receipt)]) == [False]
    assert stats(locked, queue)[:2] == (0, 1)  # still in SQS, in flight
    time.sleep(1.1)
    assert locked.lease(queue, 1, 30.0, wait=2.0) == []
    assert stats(locked, queue) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("window", "generated"),
    [(3600.0, False), (0.0, True), (0.0, False)],
    ids=["id-window", "generated-id", "given-id-no-window"],
)
def test_a_second_copy_of_a_finished_message_from_a_retried_send_is_not_run(
    locked: SqsBackend,
    queue: str,
    monkeypatch: pytest.MonkeyPatch,
    window: float,
    generated: bool,
) -> None:
    """A send whose reply was lost is sent again by the SQS client: SQS then holds two
    copies of the message. No other enqueue can have offered its id meanwhile when its id
    window outlasts the acked record's grace, or when the producer made the id for this
    one enqueue (`Envelope.id_generated`): the second copy met after the first's ack is
    then deleted, not run (a chaos run met a chord's callback run twice this way). A
    given id without that window may be a new enqueue of the same id, and runs."""
    original = locked.sqs.send

    def twice(url: str, entries: list[dict[str, Any]]) -> list[str]:
        original(url, entries)
        return original(url, entries)

    with monkeypatch.context() as patched:
        patched.setattr(locked.sqs, "send", twice)
        locked.enqueue([env(queue, "sent-twice", keep_id=window, id_generated=generated)])
    [first] = locked.lease(queue, 1, 30.0, wait=2.0)
    assert locked.ack([first.receipt]) == [True]
    again = locked.lease(queue, 10, 30.0, wait=2.0)
    if window or generated:
        assert again == []
        assert stats(locked, queue) == (0, 0, 0, 0)  # and deleted
    else:
        assert [d.id for d in again] == ["sent-twice"]


def test_a_message_with_a_generated_id_runs_again_when_it_is_retried_or_redriven(
    locked: SqsBackend, queue: str
) -> None:
    """Other copies of a generated-id message are legitimate: a retry (the same SQS
    message made visible again), a release that gives its attempt back (a new SQS
    message), a redrive from the dead-letter queue (another). Their lease records are
    released or forgotten, never acked, so each runs."""
    locked.enqueue([env(queue, "made-here", id_generated=True)])
    [first] = locked.lease(queue, 1, 30.0, wait=2.0)
    assert locked.settle([Settle.release(first.receipt, 0.0, penalty=True)]) == [True]
    [retried] = locked.lease(queue, 1, 30.0, wait=2.0)
    assert (retried.id, retried.attempt) == ("made-here", 2)
    assert locked.settle([Settle.release(retried.receipt, 0.0, penalty=False)]) == [True]
    [resent] = locked.lease(queue, 1, 30.0, wait=2.0)
    assert (resent.id, resent.attempt) == ("made-here", 2)
    assert locked.settle([Settle.dead(resent.receipt, "no")]) == [True]
    assert locked.redrive(queue) == 1
    [redriven] = locked.lease(queue, 1, 30.0, wait=2.0)
    assert (redriven.id, redriven.attempt) == ("made-here", 1)
    assert locked.ack([redriven.receipt]) == [True]
    assert stats(locked, queue) == (0, 0, 0, 0)


def test_a_queue_first_used_while_the_server_is_down_raises_backend_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker started during an outage opens its queue first (get_queue_url): that call
    must fail as every other does, with `BackendUnavailable`. It raised botocore's own
    EndpointConnectionError, which the worker's fetch loop took for a bug: the thread
    died and the worker, still alive, never leased a message again."""
    from tasuki.testing.servers import DUMMY_AWS_ENV, free_port

    for name, value in DUMMY_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    url = f"sqs://us-east-1?endpoint_url={down}&prefix=d{uuid.uuid4().hex[:8]}-"
    backend = backend_from_url(url + f"&locks=sqlite:///{tmp_path / 'locks.db'}")
    app = tasuki.App(url)

    @app.job()
    def noop() -> None: ...

    try:
        with pytest.raises(tasuki.errors.BackendUnavailable, match="unreachable"):
            backend.lease("default", 1, 2.0)
        with pytest.raises(tasuki.errors.BackendUnavailable, match="unreachable"):
            noop.enqueue()
    finally:
        backend.close()
        app.close()
