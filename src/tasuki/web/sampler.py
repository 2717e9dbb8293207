"""Samples of every queue's counts, taken by the dashboard itself every few seconds.

They feed the rate charts of the last hour: each sample holds a queue's stats and its
settled totals (acked and dead so far), so a rate is the difference of two samples
divided by the time between them. One `stats` and one `settled_totals` call per queue
per sample: the cost does not grow with the number of messages.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass

from tasuki import logs
from tasuki.app import App
from tasuki.backends.base import QueueStats, SettledTotals
from tasuki.errors import TasukiError

WINDOW = 3600.0


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    stats: QueueStats
    totals: SettledTotals | None


@dataclass(frozen=True, slots=True)
class Rate:
    """Messages per second between two samples, ending at `at`."""

    at: float
    acked: float
    dead: float


class Sampler:
    def __init__(self, app: App, every: float = 5.0, window: float = WINDOW) -> None:
        self.app = app
        self.every = every
        self.window = window
        self._samples: dict[str, deque[Sample]] = {}
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._counts = app.backend.capabilities.settled_counts

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="tasuki-dashboard-sampler", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except TasukiError as exc:  # the backend is away: try again next time
                logs.event("dashboard sampling failed", error=str(exc))
            except Exception as exc:  # anything else: the charts must not stop for good
                logs.event("dashboard sampling failed", error=f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.every)

    def queues(self) -> list[str]:
        """The queues that hold messages, and those that held some since the dashboard
        started: a queue that drained stays listed, with its rates and reliability counts."""
        with self._mutex:
            seen = set(self._samples)
        return sorted(seen.union(self.app.queues()))

    def sample(self) -> None:
        """Take one sample of every queue."""
        backend = self.app.backend
        for queue in self.queues():
            stats = backend.stats(queue)
            totals = backend.settled_totals(queue) if self._counts else None
            self.add(queue, Sample(time.time(), stats, totals))

    def add(self, queue: str, sample: Sample) -> None:
        with self._mutex:
            samples = self._samples.get(queue)
            if samples is None:
                samples = self._samples[queue] = deque()
            samples.append(sample)
            while samples and samples[0].at < sample.at - self.window:
                samples.popleft()

    def samples(self, queue: str) -> list[Sample]:
        with self._mutex:
            return list(self._samples.get(queue, ()))

    def rates(self, queue: str) -> list[Rate]:
        """Acked and dead messages per second between consecutive samples."""
        samples = [s for s in self.samples(queue) if s.totals is not None]
        rates = []
        for before, after in itertools.pairwise(samples):
            assert before.totals is not None and after.totals is not None
            span = after.at - before.at
            if span <= 0:
                continue
            acked = max(0, after.totals.acked - before.totals.acked) / span
            dead = max(0, after.totals.dead - before.totals.dead) / span
            rates.append(Rate(after.at, acked, dead))
        return rates
