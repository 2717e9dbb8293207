"""`reliability`: redeliveries, lost leases and expiry-to-start times counted by the backend
at lease time, and the heartbeat lags workers add with `add_meters`; exact after a script."""

from __future__ import annotations

import bisect
import time

import pytest

from tasuki.backends.base import Backend, Settle
from tasuki.core import reliability
from tasuki.core.message import ErrorInfo
from tasuki.core.reliability import LAG_BOUNDS, RECOVERY_BOUNDS
from tasuki.testing.contract.helpers import env


def counts(backend: Backend, queue: str) -> tuple[int, int, int, int]:
    r = backend.reliability(queue)
    assert r is not None
    return (r.redeliveries, r.leases_lost, r.expiry_to_start.count, r.heartbeat_lag.count)


class TestReliability:
    pytestmark = pytest.mark.requires("reliability_counts")

    def test_a_new_queue_counts_nothing(self, backend: Backend, queue: str) -> None:
        r = backend.reliability(queue)
        assert r is not None
        assert counts(backend, queue) == (0, 0, 0, 0)
        assert r.expiry_to_start.counts == (0,) * (len(RECOVERY_BOUNDS) + 1)
        assert r.heartbeat_lag.mean is None and r.heartbeat_lag.quantile(0.99) is None

    def test_lost_lease_redelivery_and_expiry_to_start(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "crash", max_attempts=5), env(queue, "steady")])
        expires_after = time.time() + short  # the lease is granted after this
        [crashed] = backend.lease(queue, 1, short)
        [steady] = backend.lease(queue, 1, 30.0)
        assert (crashed.id, steady.id) == ("crash", "steady")
        assert counts(backend, queue) == (0, 0, 0, 0)  # first attempts, no lease lost yet

        time.sleep(short + 0.2)
        [again] = backend.lease(queue, 5, 30.0)
        waited = time.time() - expires_after  # at least the time from expiry to start
        assert (again.id, again.attempt) == ("crash", 2)
        r = backend.reliability(queue)
        assert r is not None
        assert (r.redeliveries, r.leases_lost, r.expiry_to_start.count) == (1, 1, 1)
        assert 0.1 <= r.expiry_to_start.seconds <= waited + 0.05
        recovery = r.expiry_to_start
        assert recovery.counts[bisect.bisect_left(RECOVERY_BOUNDS, recovery.seconds)] == 1

        # A retry is a redelivery too; a release without penalty gives its attempt back, so
        # the next lease of that message is attempt 1 again, not a redelivery.
        backend.settle(
            [Settle.release(again.receipt, 0.0, penalty=True, error=ErrorInfo("ValueError", "x"))]
        )
        backend.settle([Settle.release(steady.receipt, 0.0, penalty=False)])
        leased = {d.id: d.attempt for d in backend.lease(queue, 5, 30.0)}
        assert leased == {"crash": 3, "steady": 1}
        assert counts(backend, queue) == (2, 1, 1, 0)

    def test_an_exhausted_lost_lease_counts_as_lost_and_never_starts(
        self, backend: Backend, queue: str, short: float
    ) -> None:
        backend.enqueue([env(queue, "poison", max_attempts=1)])
        backend.lease(queue, 1, short)
        time.sleep(short + 0.1)
        assert backend.lease(queue, 1, 30.0) == []  # dead: "lease expired 1 times"
        assert backend.stats(queue).dead == 1
        assert counts(backend, queue) == (0, 1, 0, 0)

    def test_heartbeat_lags_added_by_workers(self, backend: Backend, queue: str) -> None:
        other = f"{queue}-other"
        first: dict[str, int] = {}
        for lag in (0.001, 0.004, 0.3, 20.0):
            reliability.observe(first, reliability.LAG, lag)
        backend.add_meters(queue, first)
        second: dict[str, int] = {}
        reliability.observe(second, reliability.LAG, 0.004)
        backend.add_meters(queue, second)
        backend.add_meters(queue, {})

        counted = backend.reliability(queue)
        assert counted is not None
        expected = [0] * (len(LAG_BOUNDS) + 1)
        expected[0], expected[LAG_BOUNDS.index(0.5)], expected[-1] = 3, 1, 1
        assert list(counted.heartbeat_lag.counts) == expected
        assert counted.heartbeat_lag.seconds == pytest.approx(20.309, abs=1e-6)
        assert counted.heartbeat_lag.quantile(0.5) == 0.005
        assert counted.heartbeat_lag.quantile(1.0) == float("inf")
        assert counts(backend, queue) == (0, 0, 0, 5)
        assert counts(backend, other) == (0, 0, 0, 0)

    def test_the_counts_outlive_a_purge(self, backend: Backend, queue: str, short: float) -> None:
        backend.enqueue([env(queue, "a")])
        backend.lease(queue, 1, short)
        time.sleep(short + 0.1)
        backend.lease(queue, 1, 30.0)
        backend.purge(queue)
        assert counts(backend, queue) == (1, 1, 1, 0)
