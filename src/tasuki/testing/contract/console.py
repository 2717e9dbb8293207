"""The console (DESIGN §4d): pause, listings by state, actions that re-check each
message's state, the worker registry and per-job stats."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tasuki.app.application import App
from tasuki.backends.base import Backend, Envelope, Settle
from tasuki.core.console import BrowseState, JobTally, WorkerInfo, check_state
from tasuki.core.message import JOB_HEADER
from tasuki.core.policies import Retry
from tasuki.core.records import MessageInfo
from tasuki.testing.contract.helpers import env, eventually, stats


def job_env(queue: str, n: int | str, job: str, **fields: Any) -> Envelope:
    return env(queue, n, headers={JOB_HEADER: job}, **fields)


def every_id(
    backend: Backend,
    queue: str,
    state: BrowseState,
    newest_first: bool = False,
    job: str | None = None,
) -> list[str]:
    """A whole listing, one message a page: the cursor must neither skip nor repeat."""
    ids: list[str] = []
    cursor = None
    while True:
        page = backend.browse(
            queue,
            state,
            job=job,
            newest_first=newest_first,
            limit=1,
            cursor=cursor,
        )
        ids.extend(item.info.id for item in page.items)
        if page.cursor is None:
            return ids
        cursor = page.cursor
        assert len(ids) < 100


def a_worker(heartbeat: float) -> WorkerInfo:
    return WorkerInfo(
        id=f"w-{uuid.uuid4().hex[:8]}",
        host="host-1",
        pid=1234,
        version="1.2.3",
        queues=("a", "b"),
        concurrency=4,
        started_at=time.time(),
        heartbeat=heartbeat,
    )


@pytest.mark.requires("pause")
class TestPause:
    def test_pause_is_kept_per_queue(self, backend: Backend, queue: str) -> None:
        other = f"{queue}-other"
        backend.pause(queue)
        backend.pause(queue)
        assert queue in backend.paused() and other not in backend.paused()
        backend.resume(queue)
        backend.resume(queue)
        assert queue not in backend.paused()

    def test_a_paused_queue_is_not_leased_within_a_second_and_enqueue_works(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        app = App(backend=backend)
        ran: list[int] = []

        @app.job(queue=queue)
        def note(n: int) -> None:
            ran.append(n)

        worker = app.worker(queues=[queue], concurrency=2, announce_every=0.5)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            note.enqueue(1)
            eventually(lambda: ran == [1], timeout=10.0)
            app.pause(queue)
            time.sleep(1.0)
            note.enqueue(2)  # enqueue still works
            note.options(delay=short).enqueue(3)  # and a delay still comes due
            time.sleep(short + 1.0)
            assert ran == [1]
            assert stats(backend, queue)[0] == 2 or not backend.capabilities.exact_stats
            app.resume(queue)
            eventually(lambda: sorted(ran) == [1, 2, 3], timeout=10.0)
        finally:
            worker.stop(grace=1.0)
            thread.join(10.0)


@pytest.fixture
def console_states(backend: Backend, queue: str, short: float) -> Iterator[dict[str, list[str]]]:
    """Messages in each state: ready r0..r2 (r1 of job "b"), delayed d0, d1 (d1 of "b"),
    in flight f0, dead x0 (each in order of enqueue)."""
    backend.enqueue([job_env(queue, "f0", "a"), job_env(queue, "x0", "a")])
    leased = {d.id: d for d in backend.lease(queue, 2, 60.0)}
    backend.settle([Settle.dead(leased["x0"].receipt, "broken")])
    for n, job in (("r0", "a"), ("r1", "b"), ("r2", "a")):
        backend.enqueue([job_env(queue, n, job)])
        time.sleep(0.01)
    for n, job, delay in (("d0", "a", 60.0), ("d1", "b", 120.0)):
        backend.enqueue([job_env(queue, n, job, delay=delay)])
    yield {
        "ready": ["r0", "r1", "r2"],
        "delayed": ["d0", "d1"],
        "in_flight": ["f0"],
        "dead": ["x0"],
    }


@pytest.mark.requires("browsing")
class TestBrowse:
    def test_in_flight_and_dead_are_listed_with_their_job(
        self, backend: Backend, queue: str, console_states: dict[str, list[str]]
    ) -> None:
        [flying] = backend.browse(queue, "in_flight").items
        assert (flying.info.id, flying.info.state, flying.headers[JOB_HEADER]) == (
            "f0",
            "in_flight",
            "a",
        )
        assert flying.body == b"body-f0"
        page = backend.browse(queue, "dead")
        assert [i.info.id for i in page.items] == ["x0"] and page.cursor is None
        assert page.items[0].info.state == "dead"
        assert backend.browse(queue, "dead", job="b").items == []
        assert [i.info.id for i in backend.browse(queue, "dead", job="a").items] == ["x0"]
        assert [i.info.id for i in backend.browse(queue, "in_flight", job="a").items] == ["f0"]
        assert backend.browse(queue, "in_flight", job="b").items == []

    def test_in_flight_and_dead_in_order_paged_by_cursor_and_kept_in_step(
        self, backend: Backend, queue: str
    ) -> None:
        """Listed by lease expiry (in flight) and by time of death (dead), both ways, a
        message a page; a settle, a renewal, a redrive and a cancel are followed."""
        backend.enqueue([job_env(queue, f"m{n}", "b" if n in (1, 4) else "a") for n in range(6)])
        leased: list[Any] = []
        for _ in range(200):  # one at a time, so each lease expires after the last
            leased.extend(backend.lease(queue, 1, 60.0))
            if len(leased) == 6:
                break
            time.sleep(0.02)
        ids = [d.id for d in leased]
        assert sorted(ids) == [f"m{n}" for n in range(6)]
        for d in leased[3:]:  # dead one after the other
            time.sleep(0.02)
            assert backend.settle([Settle.dead(d.receipt, "broken")]) == [True]
        flying, dead = ids[:3], ids[3:]
        for state, want in (("in_flight", flying), ("dead", dead)):
            chosen = check_state(state)
            assert every_id(backend, queue, chosen) == want, state
            assert every_id(backend, queue, chosen, newest_first=True) == want[::-1], state
            of_b = [i for i in want if i in ("m1", "m4")]
            assert every_id(backend, queue, chosen, job="b") == of_b, state
            assert every_id(backend, queue, chosen, job="b", newest_first=True) == of_b[::-1]
        [listed] = backend.browse(queue, "dead", limit=1).items
        assert (listed.info.state, listed.info.reason, listed.body) == (
            "dead",
            "broken",
            f"body-{dead[0]}".encode(),
        )
        # Settled: gone from the listing; renewed: listed by its new expiry.
        assert backend.settle([Settle.ack(leased[0].receipt)]) == [True]
        assert backend.extend([leased[1].receipt], 120.0) == [True]
        assert every_id(backend, queue, "in_flight") == [ids[2], ids[1]]
        assert backend.redrive(queue, [dead[0]]) == 1
        assert every_id(backend, queue, "dead") == dead[1:]
        assert backend.cancel_many(queue, [ids[2], "never"], "in_flight") == [True, False]
        assert every_id(backend, queue, "in_flight") == [ids[1]]
        assert backend.cancel_many(queue, [dead[1], "never"], "dead") == [True, False]
        assert every_id(backend, queue, "dead") == dead[2:]
        assert backend.retry_many(queue, [dead[2], "never"], "dead") == [True, False]
        assert every_id(backend, queue, "dead") == []

    def test_inspect_carries_job_and_arguments(self, backend: Backend, queue: str) -> None:
        """In flight and dead on every backend that lists them; waiting where the backend
        can read a waiting message (SQS cannot: None, as for any body not read)."""
        app = App(backend=backend)

        @app.job(queue=queue)
        def bill(amount: int, customer: str = "") -> None: ...

        bill.enqueue(7, customer="acme")
        [leased] = backend.lease(queue, 1, 60.0)
        want = ("bill", (7,), {"customer": "acme"})
        info = app.inspect(queue, leased.id)
        assert (info.state, info.job, info.args, info.kwargs) == ("in_flight", *want)
        assert backend.settle([Settle.dead(leased.receipt, "broken")]) == [True]
        info = app.inspect(queue, leased.id)
        assert (info.state, info.job, info.args, info.kwargs) == ("dead", *want)
        waiting = bill.options(delay=3600).enqueue(8)
        info = app.inspect(queue, waiting)
        if backend.capabilities.browse_waiting:
            assert (info.job, info.args, info.kwargs) == ("bill", (8,), {})
        else:
            assert (info.job, info.args, info.kwargs) == (None, None, None)
        assert app.inspect(queue, "never").job is None

    @pytest.mark.requires("browse_waiting")
    def test_each_state_oldest_and_newest_first_paged_by_cursor(
        self, backend: Backend, queue: str, console_states: dict[str, list[str]]
    ) -> None:
        for name, ids in console_states.items():
            state = check_state(name)
            assert every_id(backend, queue, state) == ids, state
            assert every_id(backend, queue, state, newest_first=True) == ids[::-1], state
        assert every_id(backend, queue, "ready", job="a") == ["r0", "r2"]
        assert every_id(backend, queue, "ready", job="a", newest_first=True) == ["r2", "r0"]
        assert every_id(backend, queue, "delayed", job="b") == ["d1"]
        page = backend.browse(queue, "ready", limit=2)
        assert len(page.items) == 2 and page.cursor is not None
        assert backend.browse(queue, "ready", limit=3).cursor is None
        # Listing changed nothing.
        assert len(backend.lease(queue, 10, 30.0)) == 3

    @pytest.mark.requires("browse_waiting")
    def test_messages_carry_job_and_arguments_and_match_filters_them(
        self, backend: Backend, queue: str
    ) -> None:
        app = App(backend=backend)

        @app.job(queue=queue)
        def bill(amount: int, customer: str = "") -> None: ...

        for n in range(30):
            bill.enqueue(n, customer="acme" if n % 10 == 3 else "other")
        page = app.messages(queue, "ready", limit=5)
        first = page.items[0]
        assert (first.job, first.args, first.kwargs) == ("bill", (0,), {"customer": "other"})
        found: list[MessageInfo] = []
        cursor = None
        while True:
            page = app.messages(queue, match={"customer": "acme"}, limit=2, cursor=cursor)
            found.extend(page.items)
            if page.cursor is None:
                break
            cursor = page.cursor
        assert [m.args for m in found] == [(3,), (13,), (23,)]
        assert [m.args for m in app.messages(queue, match={"0": 13}).items] == [(13,)]
        assert app.messages(queue, job="other").items == []


@pytest.mark.requires("browse_waiting")
class TestActions:
    def test_retry_now_makes_a_delayed_message_ready(
        self, backend: Backend, queue: str, console_states: dict[str, list[str]]
    ) -> None:
        assert backend.retry_now(queue, "d0") is True
        assert backend.retry_now(queue, "d0") is False  # no longer delayed
        assert backend.retry_now(queue, "r0") is False
        assert backend.retry_now(queue, "f0") is False
        assert backend.retry_now(queue, "never") is False
        assert backend.inspect(queue, "d0").state == "ready"
        assert sorted(d.id for d in backend.lease(queue, 10, 30.0)) == ["d0", "r0", "r1", "r2"]

    def test_a_retried_message_keeps_its_attempts(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "t")])
        [d] = backend.lease(queue, 1, 30.0)
        backend.settle([Settle.release(d.receipt, 60.0)])
        assert backend.retry_now(queue, "t") is True
        [again] = backend.lease(queue, 1, 30.0)
        assert again.attempt == 2

    def test_bulk_actions_never_touch_a_message_that_changed_state(
        self, backend: Backend, queue: str, console_states: dict[str, list[str]]
    ) -> None:
        # Listed as ready, then leased: a cancel meant for waiting messages passes it by.
        [r0] = [d for d in backend.lease(queue, 1, 60.0)]
        assert r0.id == "r0"
        assert backend.cancel_many(queue, ["r0", "r1"], "ready") == [False, True]
        assert backend.settle([Settle.ack(r0.receipt)]) == [True]  # its lease was untouched
        assert backend.retry_many(queue, ["d0", "r2", "x0"], "delayed") == [True, False, False]
        assert backend.retry_many(queue, ["x0", "d1"], "dead") == [True, False]
        assert backend.inspect(queue, "d1").state == "delayed"
        assert backend.cancel_many(queue, ["f0", "r2"], "in_flight") == [True, False]
        backend.enqueue([env(queue, "x1")])
        leased = [d for d in backend.lease(queue, 10, 60.0) if d.id == "x1"]
        assert backend.settle([Settle.dead(leased[0].receipt, "broken")]) == [True]
        assert backend.cancel_many(queue, ["x1", "r2"], "dead") == [True, False]
        assert backend.inspect(queue, "x1").state in ("unknown", "cancelled")
        if backend.capabilities.exact_stats:
            assert stats(backend, queue)[3] == 0  # the counts follow (SQLite keeps its own)

    def test_bulk_by_filter_counts_what_it_changed(self, backend: Backend, queue: str) -> None:
        app = App(backend=backend)

        @app.job(queue=queue)
        def send(n: int, to: str) -> None: ...

        for n in range(450):  # more than one batch
            send.options(delay=600.0).enqueue(n, to="a" if n % 3 else "b")
        assert app.retry_matching(queue, "delayed", match={"to": "b"}) == 150
        assert stats(backend, queue)[0] == 150
        assert app.retry_matching(queue, "delayed", match={"to": "b"}) == 0
        assert app.cancel_matching(queue, "ready") == 150
        assert app.cancel_matching(queue, "delayed", job="send") == 300
        assert stats(backend, queue) == (0, 0, 0, 0)


@pytest.mark.requires("worker_registry")
class TestWorkers:
    def test_announced_then_gone_after_three_missed_heartbeats(
        self, backend: Backend, short: float
    ) -> None:
        beat = max(short, 0.5)  # seen for 1.5 s: room for a loaded machine between the calls
        info = a_worker(beat)
        assert backend.announce(info) is False
        [seen] = [w for w in backend.workers() if w.id == info.id]
        assert (seen.host, seen.pid, seen.queues, seen.concurrency, seen.gone) == (
            "host-1",
            1234,
            ("a", "b"),
            4,
            False,
        )
        assert abs(seen.seen_at - time.time()) < 5.0
        time.sleep(3 * beat + 0.3)
        [gone] = [w for w in backend.workers() if w.id == info.id]
        assert gone.gone

    def test_a_stop_is_read_with_the_next_announce(self, backend: Backend) -> None:
        info = a_worker(5.0)
        backend.announce(info)
        assert backend.stop_worker(info.id) is True
        assert backend.announce(info) is True
        assert backend.stop_worker("no-such-worker") is False

    def test_a_worker_announces_what_it_runs_and_stops_when_asked(
        self, backend: Backend, queue: str
    ) -> None:
        app = App(backend=backend)
        go = threading.Event()

        @app.job(queue=queue)
        def hold() -> None:
            go.wait(10.0)

        worker = app.worker(queues=[queue], concurrency=2, announce_every=0.2, grace=5.0)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            message_id = hold.enqueue()

            def running() -> bool:
                mine = [w for w in app.workers() if w.id == worker.announcer.id]
                return bool(mine) and [r.message_id for r in mine[0].running] == [message_id]

            eventually(running, timeout=10.0)
            [me] = [w for w in app.workers() if w.id == worker.announcer.id]
            assert me.running[0].job == "hold" and me.queues == (queue,)
            assert app.stop_worker(worker.announcer.id)
            time.sleep(0.6)
            assert thread.is_alive()  # draining: the running job finishes first
            go.set()
            thread.join(10.0)
            assert not thread.is_alive()
        finally:
            go.set()
            worker.stop(grace=1.0)
            thread.join(10.0)


@pytest.mark.requires("job_stats")
class TestJobStats:
    def test_tallies_add_up_over_the_window(self, backend: Backend, queue: str) -> None:
        now = time.time()
        minute = now - now % 60.0
        first = JobTally(queue, "a", minute, {"succeeded": 3, "t0": 1, "t10": 2})
        second = JobTally(queue, "a", minute, {"retried": 1, "failed": 1, "t20": 1})
        other = JobTally(queue, "b", minute, {"dead": 1, "failed": 1, "t5": 1})
        old = JobTally(queue, "a", minute - 7200.0, {"succeeded": 100, "t0": 100})
        backend.announce(a_worker(5.0), [first, other, old])
        backend.announce(a_worker(5.0), [second])
        stats = backend.job_stats(queue, 3600.0)
        assert set(stats) == {"a", "b"}
        a = stats["a"]
        assert (a.succeeded, a.failed, a.retried, a.dead) == (3, 1, 1, 0)
        assert a.p50 is not None and a.p99 is not None and a.p50 < a.p99
        assert stats["b"].dead == 1
        assert backend.job_stats(queue, 3 * 3600.0)["a"].succeeded == 103
        assert backend.job_stats(f"{queue}-other", 3600.0) == {}

    def test_a_worker_counts_its_runs(self, backend: Backend, queue: str) -> None:
        app = App(backend=backend)

        @app.job(queue=queue, retry=Retry(max_attempts=1))
        def work(fail: bool) -> None:
            if fail:
                raise ValueError("no")

        for fail in (False, False, True):
            work.enqueue(fail)
        app.worker(queues=[queue], announce_every=0.2).run(until_idle=True, timeout=30.0)
        stats = app.job_stats(queue, 600.0)["work"]
        assert (stats.succeeded, stats.failed, stats.dead) == (2, 1, 1)
        assert stats.p50 is not None
