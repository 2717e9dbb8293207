"""Deadlines of running thread jobs: one loop that calls back when a job's time is up.

The timeout middleware sets `ctx.deadline`; the thread executor (`threads.py`) asks to be
called back then, and decides what a timeout means for a thread. Async jobs and process
jobs enforce their own (asyncio cancels, the process pool kills), so a worker without
thread-job timeouts never starts this loop.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from tasuki import logs

MAX_TICK = 0.5


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, Callable[[], float | None]] = {}
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def watch(self, at: float, fire: Callable[[], float | None]) -> int:
        """Call `fire` at monotonic time `at` (again at the time it returns, if any)."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tasuki-deadlines", daemon=True
                )
                self._thread.start()
            handle = next(self._order)
            self._live[handle] = fire
            heapq.heappush(self._heap, (at, handle))
            self._cond.notify()
            return handle

    def cancel(self, handle: int) -> None:
        """The job finished in time. Its heap entry is dropped when the heap is rebuilt, so
        jobs with long timeouts that finish fast do not pile up until their deadlines."""
        with self._cond:
            if (
                self._live.pop(handle, None) is not None
                and len(self._heap) > 2 * len(self._live) + 64
            ):
                self._heap = [e for e in self._heap if e[1] in self._live]
                heapq.heapify(self._heap)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(5.0)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = time.monotonic()
                if not self._heap or self._heap[0][0] > now:
                    wait = self._heap[0][0] - now if self._heap else MAX_TICK
                    self._cond.wait(min(MAX_TICK, wait))
                    continue
                _, handle = heapq.heappop(self._heap)
                fire = self._live.pop(handle, None)
                if fire is None:
                    continue
            try:
                again = fire()
            except Exception:
                logs.logger.exception("internal error enforcing a job's deadline")
                continue
            if again is not None:
                self.watch(again, fire)
