"""Which queues are paused, as the fetchers see it: the backend's `paused()`, read at
most every `PAUSE_CHECK` seconds by whichever fetcher asks first, so a pause takes hold
within a second (DESIGN §4d) for the price of one cheap read per worker per half second.
"""

from __future__ import annotations

import threading
import time

from tasuki.backends.base import Backend
from tasuki.errors import TasukiError
from tasuki.runtime.outage import Outage

PAUSE_CHECK = 0.5


class PauseWatch:
    def __init__(self, backend: Backend, every: float = PAUSE_CHECK) -> None:
        self.backend = backend
        self.every = every
        self._paused: set[str] = set()
        self._read_at = float("-inf")
        self._mutex = threading.Lock()
        self._outage = Outage("reading the paused queues")

    def holds(self, queue: str) -> bool:
        """Whether `queue` is paused, as of at most `every` seconds ago. A failed read
        keeps what the last one said (the fetcher's own lease reports the outage)."""
        now = time.monotonic()
        if now - self._read_at >= self.every and self._mutex.acquire(blocking=False):
            try:
                self._paused = self.backend.paused()
                self._outage.worked()
            except TasukiError as exc:
                self._outage.failed(exc)
            finally:
                self._read_at = now
                self._mutex.release()
        return queue in self._paused
