"""The lease wait-loop, written once for every backend.

`lease(wait=...)` means: try to lease; if nothing is due, wait until something may have
changed (another process enqueued, a delayed message fell due) and try again, until the
deadline. What "try" and "wait" mean is each backend's own business, so the loop takes
them as two functions:

- `try_lease()` returns the deliveries and a *hint* for the wait: whatever the backend
  learnt while leasing that tells the wait when to end (SQLite: the data version read
  before the lease, so a commit in between is not missed; Redis: the microseconds until
  the next delayed message, which its lease script returns in the same round trip).
- `wait_for_change(remaining, hint)` blocks for at most `remaining` seconds, returning
  early when a change may have happened. A spurious early return only costs one more
  `try_lease()`.

The memory backend calls the loop with its mutex held and waits on a condition bound to
that mutex; Redis's wait is a BLPOP on the queue's signal list; SQLite's polls
`PRAGMA data_version`; PostgreSQL's waits for a NOTIFY.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tasuki.backends.base import Delivery

Hint = TypeVar("Hint")


def lease_until(
    wait: float,
    try_lease: Callable[[], tuple[list[Delivery], Hint]],
    wait_for_change: Callable[[float, Hint], None],
) -> list[Delivery]:
    """Lease now; while nothing comes and `wait` seconds have not passed, wait and retry."""
    deadline = time.monotonic() + wait
    while True:
        leased, hint = try_lease()
        if leased:
            return leased
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return leased
        wait_for_change(remaining, hint)
