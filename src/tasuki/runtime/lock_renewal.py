"""Locks held for running jobs (dedup, uniqueness) live exactly as long as their leases.

One loop renews, every third of a lease, the locks that running jobs hold, with the
lease's length as TTL, so a worker that dies drops its locks within one visibility
timeout, as it drops its leases.
"""

from __future__ import annotations

import threading
import time

from tasuki import logs
from tasuki.backends.base import LockStore
from tasuki.runtime.blame import named
from tasuki.runtime.fatal import Fatal
from tasuki.runtime.heartbeat import LeaseKeeper

MAX_TICK = 1.0
MIN_TICK = 0.05


class LockRenewal:
    def __init__(self, locks: LockStore, keeper: LeaseKeeper, fatal: Fatal | None = None) -> None:
        self._locks = locks
        self._keeper = keeper
        self._stopped = threading.Event()
        self.fatal = fatal or Fatal()
        self._thread = threading.Thread(
            target=self.fatal.guard("lock renewal", self._run),
            name="tasuki-lock-renewal",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        renewed: dict[tuple[str, str], float] = {}
        while not self._stopped.is_set():
            now = time.monotonic()
            tick = MAX_TICK
            live: set[tuple[str, str]] = set()
            for h in self._keeper.held():
                held = h.ctx.held_locks
                if not held or h.ctx.lease_lost:
                    continue
                every = h.visibility_timeout / 3.0
                tick = min(tick, every)
                for key, owner in list(held):
                    live.add((key, owner))
                    last = renewed.setdefault((key, owner), now)
                    if now - last >= every:
                        renewed[(key, owner)] = now
                        self._renew(key, owner, h.visibility_timeout)
            for gone in set(renewed) - live:
                del renewed[gone]
            self._stopped.wait(max(MIN_TICK, tick / 2.0))

    def _renew(self, key: str, owner: str, ttl: float) -> None:
        try:
            ok = self._locks.renew([key], owner, ttl)[0]
        except Exception as exc:  # an outage, or this one key: the next round tries again
            logs.logger.warning("renewing lock %s failed: %s", key, named(exc))
            return
        if not ok:
            logs.logger.warning("lock %s lapsed while its job ran", key)
