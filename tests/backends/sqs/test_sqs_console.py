"""The console on SQS (console.py, records/console.py, records/redis_console.py): pauses,
workers and job tallies kept in the lock store, apart from whatever else that store
holds; the listings SQS cannot make refused by capability."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tasuki.backends.sqlite import SQLiteBackend
from tasuki.backends.urls import backend_from_url
from tasuki.core.console import STATS_KEPT, JobTally, WorkerInfo
from tasuki.errors import Unsupported
from tasuki.testing.contract.helpers import env
from tasuki.testing.servers import MotoServer
from tests.backends.sqs.support import local_url, opened, redis_locks_url
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
        assert (caps.browsing, caps.browse_waiting) == (False, False)
        for state in ("ready", "delayed"):
            with pytest.raises(Unsupported, match="browse_waiting") as refused:
                backend.browse("q", state)  # type: ignore[arg-type]
            assert refused.value.capability == "browse_waiting"
        with pytest.raises(Unsupported) as refused:
            backend.retry_now("q", "m")
        assert refused.value.capability == "browse_waiting"
        with pytest.raises(Unsupported) as refused:
            backend.browse("q", "in_flight")
        assert refused.value.capability == "browsing"
    finally:
        backend.close()


def test_a_store_that_keeps_no_console_refuses_it(sqs_server: MotoServer, tmp_path: Path) -> None:
    backend = opened(local_url(sqs_server, tmp_path, locks=False) + "&locks=memory://")
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
        assert backend.maintenance() == ()
    finally:
        backend.close()


def test_on_sqlite_the_console_is_apart_from_a_queue_store_in_the_same_file(
    sqs_server: MotoServer, tmp_path: Path
) -> None:
    path = tmp_path / "shared.db"
    backend = opened(local_url(sqs_server, tmp_path, locks=False) + f"&locks=sqlite:///{path}")
    store = backend_from_url(f"sqlite:///{path}")
    assert isinstance(store, SQLiteBackend)
    try:
        backend.pause("q")
        store.pause("other")
        assert backend.paused() == {"q"} and store.paused() == {f"{_ns(backend)}q", "other"}
        mine, theirs = a_worker(), a_worker()
        now = time.time()
        tally = JobTally("q", "job", now - now % 60.0, {"succeeded": 2, "t3": 2})
        backend.announce(mine, [tally])
        store.announce(theirs)
        assert [w.id for w in backend.workers()] == [mine.id]
        assert mine.id not in [w.id for w in store.workers()]
        assert backend.stop_worker(theirs.id) is False
        assert backend.stop_worker(mine.id) is True and backend.announce(mine) is True
        assert backend.job_stats("q", 600.0)["job"].succeeded == 2
        assert store.job_stats("q", 600.0) == {}
        assert [s.name for s in backend.maintenance()] == ["console"]
    finally:
        store.close()
        backend.close()


def test_on_redis_tallies_expire_and_old_workers_are_dropped(
    request: pytest.FixtureRequest, sqs_server: MotoServer, tmp_path: Path
) -> None:
    backend = opened(redis_locks_url(request, sqs_server, tmp_path))
    try:
        console = backend.sqs.console
        redis = backend.sqs.lock_backend.redis  # type: ignore[union-attr]
        queue = f"q-{uuid.uuid4().hex[:8]}"
        now = time.time()
        minute = now - now % 60.0
        backend.announce(a_worker(), [JobTally(queue, "job", minute, {"dead": 1})])
        key = console._stats_key(queue, minute)  # type: ignore[union-attr]
        assert 0 < redis.command("PTTL", key) <= (STATS_KEPT + 60.0) * 1000
        assert backend.job_stats(queue, 60.0)["job"].dead == 1
        old = a_worker()
        backend.announce(old)
        redis.command("ZADD", console._seen, 0, old.id)  # type: ignore[union-attr]
        assert old.id not in [w.id for w in backend.workers()]
        assert redis.command("HEXISTS", console._workers, old.id) == 0  # type: ignore[union-attr]
        assert backend.maintenance() == ()  # Redis expires what it keeps
    finally:
        backend.close()


def _ns(backend: object) -> str:
    return backend.sqs.console.namespace  # type: ignore[attr-defined]
