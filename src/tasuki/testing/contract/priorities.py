"""Priorities: strict within a queue, FIFO within a level, and aging: a
message that waited `priority_aging` seconds ranks one level higher."""

from __future__ import annotations

import time

import pytest

from tasuki.backends.base import Backend, Settle
from tasuki.testing.contract.helpers import env


def _order(backend: Backend, queue: str) -> list[str]:
    out = []
    while batch := backend.lease(queue, 1, 30.0):
        out.append(batch[0].id)
    return out


@pytest.mark.requires("priorities")
class TestPriorities:
    def test_higher_priority_first_fifo_within_a_level(self, backend: Backend, queue: str) -> None:
        plan = [("a", 0), ("b", 5), ("c", 9), ("d", 5), ("e", 0), ("f", 9)]
        for msg_id, priority in plan:
            backend.enqueue([env(queue, msg_id, priority=priority)])
            time.sleep(0.002)  # distinct enqueue times: FIFO is checked, not a tie
        assert _order(backend, queue) == ["c", "f", "b", "d", "a", "e"]

    def test_a_batch_lease_takes_the_highest_first(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, f"low{i}", priority=1) for i in range(20)])
        backend.enqueue([env(queue, f"high{i}", priority=8) for i in range(5)])
        leased = backend.lease(queue, 5, 30.0)
        assert sorted(d.id for d in leased) == [f"high{i}" for i in range(5)]

    def test_a_batch_lease_hands_its_messages_out_by_rank(
        self, backend: Backend, queue: str
    ) -> None:
        """A worker runs a lease's messages in the order it gets them: one lease of all
        six hands them out as six leases of one would."""
        plan = [("a", 0), ("b", 5), ("c", 9), ("d", 5), ("e", 0), ("f", 9)]
        for msg_id, priority in plan:
            backend.enqueue([env(queue, msg_id, priority=priority)])
            time.sleep(0.002)
        leased = backend.lease(queue, 6, 30.0)
        assert [d.id for d in leased] == ["c", "f", "b", "d", "a", "e"]

    def test_waiting_ages_a_message_up_one_level_per_period(
        self, backend: Backend, queue: str
    ) -> None:
        # A period well above the waits: an enqueue that takes a while (SQS's first use of
        # a level creates its queue) must not age "old" past a period before "new" is in.
        backend.priority_aging = 1.0
        backend.enqueue([env(queue, "old", priority=0)])
        time.sleep(0.3)
        # 0.3 s of waiting is less than a period: a level higher still goes first.
        backend.enqueue([env(queue, "new", priority=1)])
        assert _order(backend, queue) == ["new", "old"]
        backend.enqueue([env(queue, "old2", priority=0)])
        time.sleep(1.4)
        # Over a period of waiting: it ranks above a level-1 message enqueued now.
        backend.enqueue([env(queue, "new2", priority=1)])
        assert _order(backend, queue) == ["old2", "new2"]

    def test_a_delayed_high_priority_message_waits_its_time(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "later", priority=9, delay=short)])
        backend.enqueue([env(queue, "now", priority=0)])
        assert _order(backend, queue) == ["now"]
        time.sleep(short + 0.05)
        assert _order(backend, queue) == ["later"]

    def test_a_released_message_keeps_its_priority(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "p9", priority=9)])
        [d] = backend.lease(queue, 1, 30.0)
        backend.enqueue([env(queue, f"p0-{i}", priority=0) for i in range(3)])
        backend.settle([Settle.release(d.receipt, 0.0, penalty=True)])
        assert _order(backend, queue)[0] == "p9"

    @pytest.mark.requires("inspection")
    def test_inspect_tells_the_priority(self, backend: Backend, queue: str) -> None:
        backend.enqueue([env(queue, "i", priority=7)])
        assert backend.inspect(queue, "i").priority == 7
        backend.lease(queue, 1, 30.0)
        assert backend.inspect(queue, "i").priority == 7
        assert [m.priority for m in backend.in_flight(queue)] == [7]
