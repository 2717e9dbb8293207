"""The console on SQS (console.py, records/console.py, records/redis_console.py): pauses,
workers and job tallies kept in the lock store, apart from whatever else that store
holds; the listings of in-flight and dead messages kept there (records/listing.py);
the listings SQS cannot make refused by capability."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tasuki.backends.base import Delivery, Settle
from tasuki.backends.sqs import SqsBackend
from tasuki.backends.sqs.records.listing import LISTED_BODY_MAX
from tasuki.backends.urls import backend_from_url
from tasuki.core.console import JobTally, WorkerInfo
from tasuki.errors import Unsupported
from tasuki.testing.contract.helpers import env
from tasuki.testing.servers import MotoServer
from tests.backends.sqs.support import local_url, opened
from tests.support.deps import need

need("boto3")


def a_worker() -> WorkerInfo:
    return WorkerInfo(
        id=f"w-{uuid.uuid4().hex[:8]}",
        host="h",
        pid=1,
        version="1",
        queues=("q",),
        concurrency=1,
        started_at=time.time(),
    )


def test_a_long_poll_that_returns_while_paused_leases_nothing(locked_url: str) -> None:
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, "m")])
        backend.pause(queue)
        assert backend.lease(queue, 1, 30.0, wait=1.0) == []
        backend.resume(queue)
        [again] = backend.lease(queue, 1, 30.0, wait=1.0)
        assert (again.id, again.attempt) == ("m", 1)  # put back unleased: no attempt spent
    finally:
        backend.close()


def test_waiting_listings_are_refused_naming_the_capability(locked_url: str) -> None:
    backend = opened(locked_url)
    try:
        caps = backend.capabilities
        assert (caps.pause, caps.worker_registry, caps.job_stats) == (True, True, True)
        assert (caps.browsing, caps.browse_waiting) == (True, False)
        for state in ("ready", "delayed"):
            with pytest.raises(Unsupported, match="browse_waiting") as refused:
                backend.browse("q", state)  # type: ignore[arg-type]
            assert refused.value.capability == "browse_waiting"
        with pytest.raises(Unsupported) as refused:
            backend.retry_now("q", "m")
        assert refused.value.capability == "browse_waiting"
        assert backend.browse("q", "in_flight").items == []  # listed from the lock store
        assert backend.browse("q", "dead").items == []
    finally:
        backend.close()


def test_without_a_lock_store_the_console_is_refused(
    sqs_server: MotoServer, tmp_path: Path
) -> None:
    backend = opened(local_url(sqs_server, tmp_path, locks=False))
    try:
        assert not backend.capabilities.pause and not backend.capabilities.worker_registry
        with pytest.raises(Unsupported, match="locks=sqlite or redis") as refused:
            backend.pause("q")
        assert refused.value.capability == "pause"
        with pytest.raises(Unsupported) as refused:
            backend.workers()
        assert refused.value.capability == "worker_registry"
        with pytest.raises(Unsupported) as refused:
            backend.job_stats("q", 60.0)
        assert refused.value.capability == "job_stats"
        with pytest.raises(Unsupported, match="locks=sqlite or redis") as refused:
            backend.browse("q", "in_flight")
        assert refused.value.capability == "browsing"
        assert backend.maintenance() == ()
    finally:
        backend.close()


def test_the_console_is_apart_from_a_queue_store_in_the_same_lock_store(locked_url: str) -> None:
    backend = opened(locked_url)
    store = backend_from_url(backend.sqs.options.locks or "")
    ns = backend.sqs.console.namespace  # type: ignore[union-attr]
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.pause(queue)
        store.pause(f"{queue}-other")
        assert queue in backend.paused() and f"{queue}-other" not in backend.paused()
        assert queue not in store.paused() and f"{ns}{queue}" in store.paused()
        mine, theirs = a_worker(), a_worker()
        now = time.time()
        tally = JobTally(queue, "job", now - now % 60.0, {"succeeded": 2, "t3": 2})
        backend.announce(mine, [tally])
        store.announce(theirs)
        assert mine.id in [w.id for w in backend.workers()]
        assert theirs.id not in [w.id for w in backend.workers()]
        assert mine.id not in [w.id for w in store.workers()]
        assert backend.stop_worker(theirs.id) is False
        assert backend.stop_worker(mine.id) is True and backend.announce(mine) is True
        assert backend.job_stats(queue, 600.0)["job"].succeeded == 2
        assert store.job_stats(queue, 600.0) == {}
        pruning = [s.name for s in store.maintenance() if s.name == "console"]
        assert [s.name for s in backend.maintenance()] == pruning
    finally:
        backend.resume(queue)
        store.close()
        backend.close()


def test_the_listings_follow_a_lapsed_lease_a_purge_and_a_large_body(locked_url: str) -> None:
    """A lease that lapsed (its worker gone) is not listed in flight; a purge empties
    both listings; a body over LISTED_BODY_MAX is listed without it."""
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        big = b"x" * (LISTED_BODY_MAX + 1)
        backend.enqueue([env(queue, "short"), env(queue, "big", body=big), env(queue, "dies")])
        leased = {}
        for _ in range(100):
            leased.update({d.id: d for d in backend.lease(queue, 3, 60.0)})
            if len(leased) == 3:
                break
        assert backend.settle([Settle.dead(leased["dies"].receipt, "broken")]) == [True]
        assert sorted(i.info.id for i in backend.browse(queue, "in_flight").items) == [
            "big",
            "short",
        ]
        [big_item] = [i for i in backend.browse(queue, "in_flight").items if i.info.id == "big"]
        assert big_item.body == b""
        # Its lease made to lapse: gone from the listing without a settle.
        listing = backend.sqs.listing
        assert listing is not None
        listing.renew([(queue, "short", leased["short"].receipt.token)], time.time() - 1.0)
        assert [i.info.id for i in backend.browse(queue, "in_flight").items] == ["big"]
        assert [i.info.id for i in backend.browse(queue, "dead").items] == ["dies"]
        assert backend.purge_dead(queue) == 1
        assert backend.browse(queue, "dead").items == []
        assert [i.info.id for i in backend.browse(queue, "in_flight").items] == ["big"]
        backend.purge(queue)
        assert backend.browse(queue, "in_flight").items == []
        assert backend.browse(queue, "dead").items == []
    finally:
        backend.close()


def leased_one(backend: SqsBackend, queue: str) -> Delivery:
    for _ in range(100):
        got = backend.lease(queue, 1, 60.0, wait=1.0)
        if got:
            return got[0]
    raise AssertionError(f"nothing to lease on {queue}")


def test_a_bulk_cancel_leaves_a_message_leased_again_while_it_ran(
    locked_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #34: between the bulk cancel's read of a listed message and its change, the
    lease is released and another worker leases the message again: it is not the
    message the listing showed in flight, so it is not cancelled, and it runs."""
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, "m")])
        first = leased_one(backend, queue)
        assert [i.info.id for i in backend.browse(queue, "in_flight").items] == ["m"]
        records, listing = backend.sqs.records, backend.sqs.listing
        assert records is not None and listing is not None
        again: list[Delivery] = []

        def meanwhile(read: Callable[..., Any]) -> Callable[..., Any]:
            def reading(*args: Any, **kwargs: Any) -> Any:
                got = read(*args, **kwargs)
                if not again:  # the first read of its state: then it changes hands
                    again.append(first)
                    assert backend.settle([Settle.release(first.receipt, penalty=False)]) == [True]
                    again[0] = leased_one(backend, queue)
                return got

            return reading

        # Whichever read of the lock store comes first (the records, the listing).
        for reader, name in ((records, "view"), (listing, "find"), (listing, "flying")):
            monkeypatch.setattr(reader, name, meanwhile(getattr(reader, name)))
        assert backend.cancel_many(queue, ["m"], "in_flight") == [False]
        monkeypatch.undo()
        [second] = again
        assert second.receipt.token != first.receipt.token
        assert backend.inspect(queue, "m").state == "in_flight"
        assert backend.ack([second.receipt]) == [True]  # its settle is not fenced out
    finally:
        backend.close()


def test_a_bulk_cancel_leaves_a_listed_message_gone_back_to_wait(locked_url: str) -> None:
    """Listed in flight, then released with a delay (a retry): a bulk cancel does not
    touch it, and it runs again; one still held is cancelled, its lease fenced out."""
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, "back", max_attempts=5), env(queue, "held")])
        leased = {d.id: d for d in (leased_one(backend, queue), leased_one(backend, queue))}
        listed = sorted(i.info.id for i in backend.browse(queue, "in_flight").items)
        assert listed == ["back", "held"]
        assert backend.settle([Settle.release(leased["back"].receipt, delay=1.0)]) == [True]
        assert backend.cancel_many(queue, ["back", "held"], "in_flight") == [False, True]
        assert backend.inspect(queue, "held").state == "cancelled"
        assert backend.extend([leased["held"].receipt], 30.0) == [False]
        assert backend.inspect(queue, "back").state != "cancelled"
        again = leased_one(backend, queue)
        assert (again.id, again.attempt) == ("back", 2)
        assert backend.ack([again.receipt]) == [True]
    finally:
        backend.close()
