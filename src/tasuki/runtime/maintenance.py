"""Runs the backend's maintenance services (`Backend.maintenance()`) beside the worker.

Forgetting expired ids and locks, or pruning an archive, is work for the store, not for
a message: it runs here, on a thread of its own, so no enqueue or settle ever waits for
it. Each service runs once per its `interval` across every worker that shares the store:
a round starts only under the lock `tasuki-maintenance:<name>`, taken in the lock store
for `interval` seconds and never released, so the first worker to ask after it lapses
runs the next round. A service that reports work left (a batch limit reached) runs again
after `BACKLOG_PAUSE`, its lock refreshed.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence

from tasuki import logs
from tasuki.backends.base import LockStore, MaintenanceService
from tasuki.errors import TasukiError
from tasuki.runtime.fatal import Fatal
from tasuki.runtime.outage import Outage

LOCK_PREFIX = "tasuki-maintenance:"
# While a service has work left, the pause between its rounds.
BACKLOG_PAUSE = 1.0


class Maintenance:
    def __init__(
        self,
        services: Sequence[MaintenanceService],
        locks: LockStore,
        fatal: Fatal | None = None,
    ) -> None:
        self.services = list(services)
        self.locks = locks
        self.owner = uuid.uuid4().hex
        self.rounds = 0  # rounds this worker ran (for tests and logs)
        self._stop = threading.Event()
        self._outage = Outage("backend maintenance")
        self.fatal = fatal or Fatal()
        self._thread = threading.Thread(
            target=self.fatal.guard("maintenance", self._run),
            name="tasuki-maintenance",
            daemon=True,
        )

    def start(self) -> None:
        if self.services:
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        due = dict.fromkeys(range(len(self.services)), time.monotonic())
        while not self._stop.is_set():
            now = time.monotonic()
            for n, service in enumerate(self.services):
                if due[n] <= now and not self._stop.is_set():
                    due[n] = time.monotonic() + self._round(service)
            self._stop.wait(max(0.0, min(due.values()) - time.monotonic()))

    def _round(self, service: MaintenanceService) -> float:
        """Run `service` if its lock is free; the seconds until it is due again."""
        try:
            if not self.locks.acquire(LOCK_PREFIX + service.name, self.owner, service.interval):
                return service.interval  # another worker runs it this time
            more = service.run()
        except TasukiError as exc:
            self._outage.failed(exc, service.interval)
            return service.interval
        except Exception:  # a bug in one service: the others, and its next round, go on
            logs.logger.exception("maintenance service %s failed", service.name)
            return service.interval
        self._outage.worked()
        self.rounds += 1
        return BACKLOG_PAUSE if more else service.interval
