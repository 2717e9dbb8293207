"""Cancel, progress and results on SQS, kept in the lease records of either lock store
(SQLite's table, Redis's keys): the contract suite runs on SQLite's; these run on both,
and check what the contract cannot see (the deletion at the next receive, the id, lease
and result records, dead and redriven messages)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasuki.backends.base import Effects, Envelope, Keep, Progress, Receipt, Settle
from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.helpers import stats
from tasuki.testing.servers import MotoServer
from tests.support.deps import need

need("boto3")

from tasuki.backends.sqs import SqsBackend  # noqa: E402


@pytest.fixture(params=["sqlite", "redis"])
def sqs(
    request: pytest.FixtureRequest, sqs_server: MotoServer, tmp_path: Path
) -> Iterator[SqsBackend]:
    if request.param == "redis":
        locks = request.getfixturevalue("redis_server").url()
    else:
        locks = f"sqlite:///{tmp_path / 'locks.db'}"
    url = (
        f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix=c{uuid.uuid4().hex[:10]}-"
        f"&locks={locks}"
    )
    backend = backend_from_url(url)
    assert isinstance(backend, SqsBackend)
    yield backend
    backend.close()


def _queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


def _progress(sqs: SqsBackend, queue: str, id: str) -> str:
    """The progress the lease record keeps, as stored ('' for none)."""
    records: Any = sqs.sqs.records
    key = records.lease_key(queue, id)
    if hasattr(records, "_db"):
        row = records._db.execute(
            "SELECT progress FROM tasuki_sqs_records WHERE key = ?", (key,)
        ).fetchone()
        return str(row[0])
    store: Any = sqs.sqs.lock_backend
    raw = store._command("GET", store.keys.lock(key))
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    parts = text.split("\n")
    return parts[5] if len(parts) > 5 else ""


def test_a_cancelled_waiting_message_is_deleted_when_next_received(sqs: SqsBackend) -> None:
    queue = _queue()
    sqs.enqueue([Envelope(queue, "w", b"x", keep_id=60.0), Envelope(queue, "x", b"y")])
    assert sqs.cancel(queue, "w") == "removed"
    assert sqs.cancel(queue, "w") == "unknown"  # cancelled already
    assert stats(sqs, queue)[0] == 2  # SQS still holds it
    [d] = sqs.lease(queue, 10, 30.0)
    assert d.id == "x"
    assert stats(sqs, queue)[:2] == (0, 1)  # the cancelled one was deleted, not run
    assert sqs.enqueue([Envelope(queue, "w", b"x")])[0].status == "duplicate"
    assert sqs.cancel(queue, "never") == "unknown"


def test_a_running_message_is_fenced_out_and_deleted_at_its_next_keep(sqs: SqsBackend) -> None:
    queue = _queue()
    sqs.enqueue([Envelope(queue, "r", b"x"), Envelope(queue, "s", b"y")])
    leased = {d.id: d for d in sqs.lease(queue, 2, 1.0, wait=1.0)}
    r, s = leased["r"], leased["s"]
    assert sqs.keep([Keep(r.receipt, 1.0, Progress(0.5, "half"))]) == ["held"]
    assert sqs.cancel(queue, "r") == "signalled"
    assert sqs.cancel(queue, "s") == "signalled"
    assert sqs.extend([s.receipt], 1.0) == [False]  # fenced out, still in SQS
    assert sqs.settle([Settle.release(s.receipt, 0.0)]) == [False]
    assert stats(sqs, queue)[:2] == (0, 2)
    # The holder's keep deletes its message (it has the receipt handle).
    assert sqs.keep([Keep(r.receipt, 1.0)]) == ["cancelled"]
    assert stats(sqs, queue)[:2] == (0, 1)
    assert sqs.keep([Keep(r.receipt, 1.0)]) == ["cancelled"]
    # The other lapses: received once more, and deleted, never run.
    time.sleep(1.2)
    assert sqs.lease(queue, 10, 30.0) == []
    assert stats(sqs, queue)[:2] == (0, 0)
    assert sqs.cancel(queue, "r") == "unknown"
    assert sqs.enqueue([Envelope(queue, "s", b"y")])[0].status == "duplicate"  # a window


def test_dead_and_acked_messages_cannot_be_cancelled_until_redriven(sqs: SqsBackend) -> None:
    queue = _queue()
    sqs.enqueue([Envelope(queue, "a", b"x", keep_id=600.0), Envelope(queue, "d", b"y")])
    leased = {d.id: d for d in sqs.lease(queue, 2, 30.0, wait=1.0)}
    assert sqs.settle([Settle.ack(leased["a"].receipt), Settle.dead(leased["d"].receipt, "no")])
    sqs.sqs.records.forget([(queue, "a")])  # type: ignore[union-attr]  # the ack's record gone
    assert sqs.cancel(queue, "a") == "unknown"  # its id says finished
    assert sqs.cancel(queue, "d") == "unknown"
    assert sqs.redrive(queue, ["d"]) == 1
    assert sqs.cancel(queue, "d") == "removed"
    assert sqs.lease(queue, 10, 30.0) == []


def test_progress_is_stored_for_the_current_lease_only(sqs: SqsBackend) -> None:
    queue = _queue()
    sqs.enqueue([Envelope(queue, "p", b"x")])
    [old] = sqs.lease(queue, 1, 1.0)
    assert sqs.keep([Keep(old.receipt, 1.0, Progress(0.25, "1 of 4"))]) == ["held"]
    assert _progress(sqs, queue, "p") == '[0.25,"1 of 4"]'
    assert sqs.keep([Keep(old.receipt, 1.0)]) == ["held"]  # None keeps what is there
    assert _progress(sqs, queue, "p") == '[0.25,"1 of 4"]'
    time.sleep(1.2)
    [new] = sqs.lease(queue, 1, 30.0)
    assert _progress(sqs, queue, "p") == ""  # a new lease starts with none
    stale = Receipt(queue, "p", old.token)
    assert sqs.keep([Keep(stale, 30.0, Progress(0.9, "zombie"))]) == ["lost"]
    assert _progress(sqs, queue, "p") == ""
    assert sqs.keep([Keep(new.receipt, 30.0, Progress(0.5, "2 of 4"))]) == ["held"]
    assert _progress(sqs, queue, "p") == '[0.5,"2 of 4"]'
    assert sqs.ack([new.receipt]) == [True]


def test_a_keep_pushes_out_what_this_process_holds_like_an_extend(sqs: SqsBackend) -> None:
    """A lease kept with progress (keep, not extend) keeps the `Held` that settling needs
    (the body for a dead letter, the attempt a release gives back) from being pruned as
    lapsed: its deadline moves with every keep, as with every extend."""
    queue = _queue()
    sqs.enqueue([Envelope(queue, "k", b"x")])
    [d] = sqs.lease(queue, 1, 5.0)
    for call in (
        lambda: sqs.keep([Keep(d.receipt, 5.0, Progress(0.5, "half"))]),
        lambda: sqs.extend([d.receipt], 5.0),
    ):
        sqs.sqs.held[d.token].deadline = 0.0  # as if the lease were long past
        before = time.monotonic()
        assert call() in (["held"], [True])
        assert sqs.sqs.held[d.token].deadline >= before + 5.0 + 60
    assert sqs.ack([d.receipt]) == [True]


def _ok(value: bytes) -> Effects:
    return Effects(result=value)


def test_results_are_kept_in_the_lock_store_under_the_lease(sqs: SqsBackend) -> None:
    """The result record's life on either store: pending at enqueue, written only by the
    current lease's settle (ok) or by the receiver that dead-letters (failed), pending
    again on redrive, none for a cancelled or purged message."""
    queue = _queue()
    sqs.enqueue([Envelope(queue, i, b"x", keep_result=60.0) for i in ("a", "b", "c")])
    sqs.enqueue([Envelope(queue, "plain", b"x")])
    assert [sqs.result(queue, i).state for i in "abc"] == ["pending"] * 3  # type: ignore[union-attr]
    assert sqs.result(queue, "plain") is None
    assert sqs.cancel(queue, "c") == "removed"
    assert sqs.result(queue, "c") is None
    leased = {d.id: d for d in sqs.lease(queue, 4, 1.0, wait=1.0)}
    assert set(leased) == {"a", "b", "plain"}
    time.sleep(1.2)  # a's and b's leases lapse; the zombies' settles keep nothing
    again = {d.id: d for d in sqs.lease(queue, 4, 30.0, wait=1.0)}
    assert sqs.settle([Settle.ack(leased["a"].receipt, _ok(b'"late"'))]) == [False]
    assert sqs.result(queue, "a").state == "pending"  # type: ignore[union-attr]
    before = time.time()
    outcome = sqs.settle(
        [Settle.ack(again["a"].receipt, _ok(b'"mine"')), Settle.dead(again["b"].receipt, "no")]
    )
    assert outcome == [True, True]
    a, b = sqs.result(queue, "a"), sqs.result(queue, "b")
    assert a is not None and (a.state, a.value) == ("ok", b'"mine"')
    assert a.expires_at is not None and before + 59 <= a.expires_at <= time.time() + 61
    assert b is not None and b.state == "failed" and b.reason == "no"
    assert sqs.redrive(queue, ["b"]) == 1
    assert sqs.result(queue, "b").state == "pending"  # type: ignore[union-attr]
    sqs.purge(queue)
    assert sqs.result(queue, "b") is None


def test_a_failed_result_is_written_once_the_dead_letter_is_there(sqs: SqsBackend) -> None:
    """A waiter told "failed" finds the dead letter: the result is written after the move
    to the dead-letter queue, not with the lease record's settle before it (which let
    `app.dead_letters()` come back empty after `job.result` raised JobFailed)."""
    queue = _queue()
    sqs.enqueue([Envelope(queue, "d", b"x", keep_result=60.0)])
    [d] = sqs.lease(queue, 1, 30.0, wait=1.0)
    seen: list[str] = []

    def at_send(**_: Any) -> None:
        seen.append(sqs.result(queue, "d").state)  # type: ignore[union-attr]

    sqs.sqs.client.meta.events.register("before-call.sqs.SendMessageBatch", at_send)
    assert sqs.settle([Settle.dead(d.receipt, "no")]) == [True]
    assert seen == ["pending"]  # while the dead letter was being sent
    assert sqs.result(queue, "d").state == "failed"  # type: ignore[union-attr]
