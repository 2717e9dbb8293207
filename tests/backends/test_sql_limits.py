"""Limits on SQLite and PostgreSQL: admission inside the lease's transaction, slots that
live with their leases, no over-admission by concurrent leasers, no rescans of parked
messages."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tasuki.backends.base import Backend, Limit
from tasuki.backends.sql import limits
from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.helpers import env, stats
from tasuki.testing.servers import PostgresServer
from tests.backends.limit_checks import check_a_kept_lease_keeps_its_slot

ONE = Limit("concurrency:one", "concurrency", 1)


@pytest.fixture(params=["sqlite", "postgresql"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Backend]]:
    """A maker of backends on one store (each its own connections, like workers)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'limits.db'}"
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        url = server.url(f"t_{uuid.uuid4().hex[:12]}")
    made: list[Backend] = []

    def new() -> Backend:
        made.append(backend_from_url(url))
        return made[-1]

    yield new
    for b in made:
        b.close()


@pytest.fixture
def backend(make: Callable[[], Backend]) -> Backend:
    return make()


def count_admissions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the number of messages each call of admission (`limits.admit`)
    decides, one entry a call: how few transactions parked how many."""
    decided: list[int] = []
    admit = limits.admit

    def counting(*args: Any, **kwargs: Any) -> limits.Admitted:
        decided.append(len(args[3]))
        return admit(*args, **kwargs)

    monkeypatch.setattr(limits, "admit", counting)
    return decided


@pytest.mark.parametrize("how", ["keep", "extend"])
def test_a_kept_lease_keeps_its_slot(backend: Backend, how: str) -> None:
    check_a_kept_lease_keeps_its_slot(backend, how, ONE)


def test_a_parked_message_is_not_looked_at_until_its_slot_frees(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend.enqueue([env("q", f"m{i}", limits=(ONE,)) for i in range(3)])
    backend.enqueue([env("q", "free")])
    first = backend.lease("q", 10, 30.0)
    assert sorted(d.id for d in first) == ["free", "m0"]
    decided = count_admissions(monkeypatch)
    assert backend.lease("q", 10, 30.0, wait=1.0) == []  # a second of leases: no rescan
    assert decided == []
    [m0] = [d for d in first if d.id == "m0"]
    backend.ack([m0.receipt])  # wakes one parked message, the oldest
    assert [d.id for d in backend.lease("q", 10, 30.0, wait=2.0)] == ["m1"]
    assert decided == [1]


def test_an_expired_holder_wakes_its_parked_messages_at_its_expiry(backend: Backend) -> None:
    backend.enqueue([env("q", f"m{i}", limits=(ONE,)) for i in range(2)])
    [dying] = backend.lease("q", 10, 0.5)
    assert backend.lease("q", 10, 30.0) == []
    started = time.monotonic()
    leased = backend.lease("q", 10, 30.0, wait=3.0)  # nobody acks: the lease's expiry
    assert len(leased) == 1 and time.monotonic() - started < 1.5
    assert backend.lease("q", 10, 30.0) == []  # still one holder: the new lease
    assert backend.ack([dying.receipt]) == [False]  # fenced out: frees nothing
    assert backend.lease("q", 10, 30.0) == []


def test_a_rate_parked_message_is_due_with_its_token(backend: Backend) -> None:
    rate = Limit("rate:r", "rate", 1, 0.5)
    backend.enqueue([env("q", f"r{i}", limits=(rate,)) for i in range(2)])
    [a] = backend.lease("q", 10, 30.0)
    started = time.monotonic()
    [b] = backend.lease("q", 10, 30.0, wait=2.0)
    assert 0.3 < time.monotonic() - started < 1.2
    assert {a.id, b.id} == {"r0", "r1"}
    assert b.attempt == 1  # parked twice or not, one attempt


@pytest.mark.parametrize("kind", ["concurrency", "rate"])
def test_concurrent_leasers_never_over_admit(make: Callable[[], Backend], kind: str) -> None:
    """Several workers leasing one key at once, each with its own connections: at no
    instant more than n holders (concurrency), no more than n starts in the window (rate);
    every message runs."""
    n, total, workers = 3, 60, 6
    limit = Limit(f"{kind}:shared", kind, n, 0.3 if kind == "rate" else 0.0)
    make().enqueue(
        [env("q", f"m{i:03}", limits=(limit,)) for i in range(total)]
        + [env("q", f"free{i:03}") for i in range(total)]
    )
    mutex = threading.Lock()
    running = 0
    peak = 0
    starts: list[tuple[float, float]] = []  # (before, after) the lease that started it
    done: set[str] = set()
    errors: list[BaseException] = []

    def work() -> None:
        nonlocal running, peak
        backend = make()
        try:
            deadline = time.monotonic() + 30.0
            while time.monotonic() < deadline:
                with mutex:
                    if len(done) == 2 * total:
                        return
                before = time.monotonic()
                batch = backend.lease("q", 4, 30.0, wait=0.05)
                after = time.monotonic()
                mine = [d for d in batch if d.id.startswith("m")]
                with mutex:
                    running += len(mine)
                    peak = max(peak, running)
                    starts.extend([(before, after)] * len(mine))
                time.sleep(0.01)
                with mutex:
                    running -= len(mine)
                    done.update(d.id for d in batch)
                assert all(backend.ack([d.receipt for d in batch]))
        except BaseException as exc:  # the thread's failure, for the test to raise
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(done) == 2 * total
    if kind == "concurrency":
        assert peak <= n
    else:
        # Each start was stamped during its lease call: n + 1 starts whose calls all fit
        # in less than `per` are n + 1 starts in one window, whenever each was stamped.
        # (A busy machine can delay a call's return, never make calls look apart.)
        starts.sort(key=lambda s: s[1])
        for i in range(len(starts) - n):
            group = starts[i : i + n + 1]
            assert max(a for _, a in group) - min(b for b, _ in group) >= 0.3 - 0.01, group


def test_the_cleaner_gives_back_the_rows_of_lapsed_slots_and_past_starts(
    backend: Backend,
) -> None:
    from tasuki.backends.sql.backend import SQLBackend
    from tasuki.backends.sql.maintenance.limits import LimitsCleaner

    assert isinstance(backend, SQLBackend)
    rate = Limit("rate:gone", "rate", 5, 0.2)
    backend.enqueue([env("q", "c", limits=(ONE,)), env("q", "r", limits=(rate,))])
    leased = backend.lease("q", 10, 0.2)
    assert len(leased) == 2

    def rows() -> tuple[int, int]:
        with backend.dialect.read() as conn:
            [(slots,)] = conn.execute("SELECT count(*) FROM tasuki_slots").fetchall()
            [(starts,)] = conn.execute("SELECT count(*) FROM tasuki_rate_starts").fetchall()
        return slots, starts

    [cleaner] = [s for s in backend.services if isinstance(s, LimitsCleaner)]
    cleaner.run()
    assert rows() == (1, 1)  # live: kept
    time.sleep(0.3)  # the lease lapsed, the start left its window
    cleaner.run()
    assert rows() == (0, 0)


def test_a_run_of_parked_messages_is_decided_a_few_hundred_at_a_time(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Messages over their limit ahead of the others are parked by few transactions,
    not one lease's batch (here 1) at a time: a worker reaches what follows at once."""
    backend.enqueue([env("q", "holder", limits=(ONE,))])
    [holder] = backend.lease("q", 1, 30.0)
    backend.enqueue([env("q", f"p{i:03}", limits=(ONE,)) for i in range(600)])
    backend.enqueue([env("q", "free")])
    decided = count_admissions(monkeypatch)
    assert [d.id for d in backend.lease("q", 1, 30.0)] == ["free"]
    assert sum(decided) == 600 and len(decided) <= 5, decided
    assert stats(backend, "q")[:3] == (0, 2, 600)  # parked: delayed, not ready
    backend.ack([holder.receipt])
    assert [d.id for d in backend.lease("q", 10, 30.0, wait=2.0)] == ["p000"]


def test_messages_over_a_limit_between_others_are_parked_together_and_order_holds(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hot key's messages with unlimited ones between them (one in ten): parked a few
    hundred per transaction; the unlimited ones come in their order, and a message
    within its limits is never leased ahead of an unlimited one ranked before it."""
    backend.enqueue([env("q", "holder", limits=(ONE,))])
    [holder] = backend.lease("q", 1, 30.0)
    other = Limit("concurrency:other", "concurrency", 5)
    backend.enqueue(
        [
            env("q", f"f{i:03}") if i % 10 == 0
            else env("q", f"o{i:03}", limits=(other,)) if i % 10 == 5
            else env("q", f"h{i:03}", limits=(ONE,))
            for i in range(600)
        ]
    )  # fmt: skip
    decided = count_admissions(monkeypatch)
    first = backend.lease("q", 4, 30.0)
    assert [d.id for d in first] == ["f000", "o005", "f010", "o015"]
    assert len(decided) <= 6, decided  # the 480 hot ones: parked by a few transactions
    assert stats(backend, "q")[2] == 480  # all of them parked (delayed)
    backend.ack([d.receipt for d in first if d.id.startswith("o")])
    got = [d.id for d in backend.lease("q", 100, 30.0)]
    others = [f"o{i:03}" for i in range(25, 600, 10)][:5]  # its 5 slots, in order
    assert got == sorted([f"f{i:03}" for i in range(20, 600, 10)] + others, key=lambda m: m[1:])
    backend.ack([holder.receipt])
