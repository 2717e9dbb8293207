"""Rate and concurrency limits admitted at lease time: an over-limit message
is not leased, costs no attempt, waits without polling; a concurrency slot is the lease
that holds it."""

from __future__ import annotations

import time

import pytest

from tasuki.backends.base import Backend, Keep, Limit, Settle
from tasuki.testing.contract.helpers import env

TWO = Limit("concurrency:tenant-a", "concurrency", 2)
OTHER = Limit("concurrency:tenant-b", "concurrency", 2)


def _lease_ids(backend: Backend, queue: str, n: int = 50, vt: float = 30.0) -> list[str]:
    return sorted(d.id for d in backend.lease(queue, n, vt))


class TestLimits:
    @pytest.mark.requires("concurrency_limits")
    def test_at_most_n_leases_hold_a_key_and_the_rest_cost_nothing(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, f"a{i}", limits=(TWO,)) for i in range(5)])
        first = backend.lease(queue, 10, 30.0)
        assert len(first) == 2
        assert backend.lease(queue, 10, 30.0) == []
        if backend.capabilities.inspection:
            waiting = {f"a{i}" for i in range(5)} - {d.id for d in first}
            assert all(backend.inspect(queue, m).attempt == 0 for m in waiting)
        # A slot freed by an ack: one more, at once.
        backend.ack([first[0].receipt])
        [third] = backend.lease(queue, 10, 30.0, wait=2.0)
        assert backend.lease(queue, 10, 30.0) == []
        # Freed by a release and by a dead letter too.
        backend.settle([Settle.release(first[1].receipt, 0.0, penalty=False)])
        assert len(backend.lease(queue, 10, 30.0, wait=2.0)) == 1
        backend.settle([Settle.dead(third.receipt, "no")])
        assert len(backend.lease(queue, 10, 30.0, wait=2.0)) == 1
        assert backend.lease(queue, 10, 30.0) == []

    @pytest.mark.requires("concurrency_limits")
    def test_one_key_over_its_limit_never_holds_back_another(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, f"a{i}", limits=(TWO,)) for i in range(6)])
        backend.enqueue([env(queue, f"b{i}", limits=(OTHER,)) for i in range(2)])
        backend.enqueue([env(queue, f"free{i}") for i in range(3)])
        leased = _lease_ids(backend, queue)
        assert len([i for i in leased if i.startswith("a")]) == 2
        assert [i for i in leased if not i.startswith("a")] == [
            "b0",
            "b1",
            "free0",
            "free1",
            "free2",
        ]

    @pytest.mark.requires("concurrency_limits")
    def test_an_expired_lease_holds_no_slot(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, f"a{i}", limits=(TWO,)) for i in range(4)])
        dying = backend.lease(queue, 10, short)
        assert len(dying) == 2
        time.sleep(short + 0.1)  # their worker died: the slots went with the leases
        again = backend.lease(queue, 10, 30.0)
        assert len(again) == 2
        # The dead worker's late acks, whatever they answer, free nothing the live hold.
        backend.ack([d.receipt for d in dying])
        assert backend.lease(queue, 10, 30.0) == []

    @pytest.mark.requires("concurrency_limits", "priorities")
    def test_a_lapsed_lease_under_a_limit_is_not_kept(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        one = Limit("concurrency:solo", "concurrency", 1)
        backend.enqueue([env(queue, "s0", limits=(one,))])
        [stalled] = backend.lease(queue, 10, short)
        time.sleep(short + 0.1)  # its worker stalled past the lease: the slot went with it
        backend.enqueue([env(queue, "s1", limits=(one,), priority=9)])
        [taken] = backend.lease(queue, 1, 30.0)
        assert taken.id == "s1"
        # Back, the stalled worker's keeper must not keep its lease: no one leased s0
        # since, but two runs would hold a limit of one.
        assert backend.keep([Keep(stalled.receipt, 30.0)]) == ["lost"]
        assert backend.extend([stalled.receipt], 30.0) == [False]
        assert backend.lease(queue, 10, 30.0) == []  # s1 holds the one slot
        backend.ack([taken.receipt])
        [again] = backend.lease(queue, 10, 30.0, wait=2.0)
        assert (again.id, again.attempt) == ("s0", 2)

    @pytest.mark.requires("concurrency_limits")
    def test_a_fenced_out_holder_cannot_free_the_slot(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        one = Limit("concurrency:solo", "concurrency", 1)
        backend.enqueue([env(queue, "s0", limits=(one,))])
        [zombie] = backend.lease(queue, 10, short)
        time.sleep(short + 0.1)
        [holder] = backend.lease(queue, 10, 30.0)
        assert holder.id == zombie.id == "s0"
        backend.enqueue([env(queue, "s1", limits=(one,))])
        assert backend.settle([Settle.ack(zombie.receipt)]) == [False]
        assert backend.lease(queue, 10, 30.0) == []  # still one holder: the current lease
        backend.ack([holder.receipt])
        assert [d.id for d in backend.lease(queue, 10, 30.0, wait=2.0)] == ["s1"]

    @pytest.mark.requires("concurrency_limits")
    def test_a_purged_holder_frees_its_slot(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, f"a{i}", limits=(TWO,)) for i in range(4)])
        held = backend.lease(queue, 10, 30.0)
        assert len(held) == 2
        assert backend.lease(queue, 10, 30.0) == []  # the other two wait for a slot
        backend.purge(queue)
        # The purged leases held the key's slots: they go with them, at once, and the
        # parked messages purged with the queue are never woken for a slot.
        backend.enqueue([env(queue, f"n{i}", limits=(TWO,)) for i in range(3)])
        assert _lease_ids(backend, queue) == ["n0", "n1"]
        # The purged run's late ack frees nothing the live leases hold.
        assert backend.settle([Settle.ack(held[0].receipt)]) == [False]
        assert backend.lease(queue, 10, 30.0) == []

    @pytest.mark.requires("rate_limits")
    def test_at_most_n_starts_in_any_window(self, backend: Backend, queue: str) -> None:
        per = max(1.0, 2 * backend.capabilities.timer_resolution)
        rate = Limit("rate:api", "rate", 3, per)
        backend.enqueue([env(queue, f"r{i}", limits=(rate,)) for i in range(9)])
        starts: list[float] = []
        deadline = time.monotonic() + 4 * per + 2.0
        while len(starts) < 9 and time.monotonic() < deadline:
            leased = backend.lease(queue, 10, 30.0, wait=0.2)
            now = time.monotonic()
            starts += [now] * len(leased)
            backend.ack([d.receipt for d in leased])
        assert len(starts) == 9, "the rate limit starved its messages"
        # Any window of `per` seconds holds at most 3 starts (a margin for the clocks).
        for i, t in enumerate(starts):
            in_window = [s for s in starts[i:] if s < t + per - 0.05]
            assert len(in_window) <= 3, starts
        # And the tokens came back: 9 starts took about two windows, not much more.
        assert starts[-1] - starts[0] < 2 * per + 1.5

    @pytest.mark.requires("rate_limits")
    def test_an_over_rate_message_costs_no_attempt(self, backend: Backend, queue: str) -> None:
        rate = Limit("rate:once", "rate", 1, 60.0)
        backend.enqueue([env(queue, "x0", limits=(rate,)), env(queue, "x1", limits=(rate,))])
        assert len(backend.lease(queue, 10, 30.0)) == 1
        assert backend.lease(queue, 10, 30.0) == []
        s = backend.stats(queue)
        assert s.ready == 0  # parked until its token is due: not counted as ready
        if backend.capabilities.inspection:
            waiting = [m for m in ("x0", "x1") if backend.inspect(queue, m).state != "in_flight"]
            assert backend.inspect(queue, waiting[0]).attempt == 0

    @pytest.mark.requires("rate_limits", "concurrency_limits")
    def test_a_message_under_both_limits_takes_a_token_only_when_admitted(
        self, backend: Backend, queue: str
    ) -> None:
        one = Limit("concurrency:both", "concurrency", 1)
        rate = Limit("rate:both", "rate", 2, 60.0)
        backend.enqueue([env(queue, f"m{i}", limits=(one, rate)) for i in range(3)])
        [a] = backend.lease(queue, 10, 30.0)
        assert backend.lease(queue, 10, 30.0) == []  # over concurrency: no token spent
        backend.ack([a.receipt])
        [b] = backend.lease(queue, 10, 30.0, wait=2.0)  # the second token
        backend.ack([b.receipt])
        assert backend.lease(queue, 10, 30.0, wait=0.3) == []  # tokens spent: 2 per minute
