"""Checks of limits that more than one backend's own tests make, each on its backend."""

from __future__ import annotations

import time

from tasuki.backends.base import Backend, Keep, Limit
from tasuki.testing.contract.helpers import env, stats


def check_a_kept_lease_keeps_its_slot(backend: Backend, how: str, one: Limit) -> None:
    """A lease of 0.5 s kept (`how`: "keep" or "extend") past its first expiry still holds
    the slot of `one` (a concurrency limit of 1): the slot lives with the lease, so the
    other message stays parked."""
    backend.enqueue([env("q", f"m{i}", limits=(one,)) for i in range(2)])
    [held] = backend.lease("q", 10, 0.5)
    if how == "keep":
        assert backend.keep([Keep(held.receipt, 30.0)]) == ["held"]
    else:
        assert backend.extend([held.receipt], 30.0) == [True]
    time.sleep(0.6)  # past the first expiry: the slot must live with the lease
    assert backend.lease("q", 10, 30.0) == []
    assert stats(backend, "q") == (0, 1, 1, 0)  # the other parked: delayed, not ready
