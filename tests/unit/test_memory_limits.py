"""`memory://`'s limits keep state only for keys in use: per-tenant keys come and go."""

from __future__ import annotations

import time

from tasuki.backends.base import Limit
from tasuki.backends.memory import MemoryBackend
from tasuki.testing.contract.helpers import env


def test_limit_state_goes_with_its_last_use() -> None:
    backend = MemoryBackend()
    tenants = [Limit(f"concurrency:q:job:t{i}", "concurrency", 1) for i in range(50)]
    rate = Limit("rate:q:job", "rate", 100, 0.2)
    backend.enqueue([env("q", f"m{i}", limits=(t, rate)) for i, t in enumerate(tenants)])
    leased = backend.lease("q", 100, 30.0)
    assert len(leased) == 50
    assert backend._store.admission.keys() == 51
    backend.ack([d.receipt for d in leased])
    assert backend._store.admission.keys() == 1  # the rate window, until `per` has passed
    time.sleep(0.25)
    assert backend.lease("q", 10, 30.0) == []
    backend.enqueue([env("q", "late", limits=(tenants[0],))])
    assert [d.id for d in backend.lease("q", 10, 0.05)] == ["late"]
    time.sleep(0.1)  # its worker died: the lapsed slot goes with the next lease call
    [again] = backend.lease("q", 10, 30.0)
    assert backend._store.admission.keys() == 1  # the live holder's key, and nothing stale
    backend.ack([again.receipt])
    assert backend._store.admission.keys() == 0
