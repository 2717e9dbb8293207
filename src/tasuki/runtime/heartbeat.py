"""The lease keeper: extends the leases of running jobs (one loop, one thread).

A lease is extended once a third of its visibility timeout has passed, so a job may run
for hours while its worker lives, and its message is redelivered within one visibility
timeout of the worker's death. An extension refused by the backend means another
delivery owns the message now: the job is told to stop and its result is never acked
with the stale token. A backend with a maximum visibility (SQS: 12 hours from receipt)
gets extensions up to it and no further, with a log line: the message is then delivered
again when that lease lapses.

How late each extension was (the heartbeat lag) goes to the middleware that listen
(`lease_extended`) and, summed per queue, to the backend's reliability meters every
`REPORT_EVERY` seconds and when the keeper stops, so that a dashboard in another
process shows it (`tasuki.core.reliability`): one small write per queue, off the hot path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tasuki import logs
from tasuki.backends.base import Backend
from tasuki.core import reliability
from tasuki.errors import TasukiError
from tasuki.runtime.outage import Outage

if TYPE_CHECKING:
    from tasuki.core.context import Context
    from tasuki.middleware.base import Middleware, MiddlewareChain

MIN_TICK = 0.01
MAX_TICK = 0.5
RETRY_TICK = 0.1
REPORT_EVERY = 5.0


@dataclass(eq=False, slots=True)
class Held:
    """A running delivery whose lease the keeper looks after."""

    ctx: Context
    visibility_timeout: float
    extended_at: float
    keeper: LeaseKeeper
    leased_at: float = 0.0
    capped: bool = False

    def extend(self, seconds: float) -> bool:
        """`ctx.extend()`: extend this lease at once."""
        return self.keeper.extend_now(self, seconds)

    @property
    def due_at(self) -> float:
        return self.extended_at + self.visibility_timeout / 3.0


class LeaseKeeper:
    def __init__(self, backend: Backend, chain: MiddlewareChain | None = None) -> None:
        self._backend = backend
        self._chain = chain
        self._max_visibility = backend.capabilities.max_visibility
        self._held: set[Held] = set()
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self.lost = 0
        self._next_wake = 0.0
        self._outage = Outage("extending leases")
        self._reports = backend.capabilities.reliability_counts
        self._lags: dict[str, dict[str, int]] = {}  # queue -> meters not yet reported
        self._lags_mutex = threading.Lock()
        self._report_at = time.monotonic() + REPORT_EVERY
        self._thread = threading.Thread(target=self._run, name="tasuki-lease-keeper", daemon=True)
        self._thread.start()

    def add_many(self, helds: Iterable[Held]) -> None:
        """Track a whole leased batch under one lock: the fetcher's hot path."""
        with self._mutex:
            next_wake = self._next_wake
            sooner = False
            for held in helds:
                self._held.add(held)
                sooner = sooner or held.due_at < next_wake
        if sooner:
            self._wake.set()

    def wake(self) -> None:
        """Re-plan now: a lease must be brought to its job's own length."""
        self._wake.set()

    def discard(self, held: Held) -> None:
        with self._mutex:
            self._held.discard(held)

    def discard_many(self, helds: Iterable[Held]) -> None:
        with self._mutex:
            for held in helds:
                self._held.discard(held)

    def held(self) -> list[Held]:
        with self._mutex:
            return list(self._held)

    def extend_now(self, held: Held, seconds: float) -> bool:
        """`ctx.extend()`: extend this one lease at once."""
        ok = self._backend.extend([held.ctx.receipt], seconds)[0]
        if ok:
            held.extended_at = time.monotonic() + max(0.0, seconds - held.visibility_timeout)
        else:
            self._lose([held])
        return ok

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._thread.join(5.0)
        self.report(last=True)

    def report(self, last: bool = False) -> None:
        """Add the heartbeat lags observed since the last report to the backend's meters;
        kept for the next report if the backend fails, dropped with a log line if `last`."""
        with self._lags_mutex:
            lags, self._lags = self._lags, {}
        for queue, meters in lags.items():
            try:
                self._backend.add_meters(queue, meters)
            except TasukiError as exc:
                if last:
                    logs.logger.warning("heartbeat lags of queue %s not reported: %s", queue, exc)
                    continue
                with self._lags_mutex:
                    reliability.add(self._lags.setdefault(queue, {}), meters)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.clear()
            due, _ = self._plan(time.monotonic())
            if due:
                self._extend(due)
            now = time.monotonic()
            still_due, next_at = self._plan(now, publish=True)
            if still_due:  # the backend refused to answer: try again soon
                next_at = min(next_at, now + RETRY_TICK)
            if now >= self._report_at:
                self._report_at = now + REPORT_EVERY
                self.report()
            self._wake.wait(max(MIN_TICK, next_at - now))

    def _plan(self, now: float, publish: bool = False) -> tuple[list[Held], float]:
        """Leases due for extension, and when the next one comes."""
        due: list[Held] = []
        next_at = now + MAX_TICK
        with self._mutex:
            for h in self._held:
                if h.capped:
                    continue
                if h.due_at <= now:
                    due.append(h)
                else:
                    next_at = min(next_at, h.due_at)
            # Until the loop has planned its sleep, any add must wake it.
            self._next_wake = next_at if publish else now
        return due, next_at

    def _extend(self, due: list[Held]) -> None:
        by_vt: dict[float, list[Held]] = {}
        for h in due:
            by_vt.setdefault(self._length(h), []).append(h)
        for vt, group in by_vt.items():
            started = time.monotonic()
            try:
                results = self._backend.extend([h.ctx.receipt for h in group], vt)
            except TasukiError as exc:
                self._outage.failed(exc)
                continue
            self._outage.worked()
            lost = []
            listeners = self._listeners("lease_extended")
            lags: list[tuple[str, float]] = []
            for h, ok in zip(group, results, strict=True):
                if ok:
                    lag = max(0.0, started - h.due_at)
                    h.extended_at = started
                    lags.append((h.ctx.message.queue, lag))
                    for m in listeners:
                        _tell(m.lease_extended, h.ctx, lag)
                else:
                    lost.append(h)
            if self._reports and lags:
                with self._lags_mutex:
                    for queue, lag in lags:
                        reliability.observe(self._lags.setdefault(queue, {}), reliability.LAG, lag)
            if lost:
                self._lose(lost)

    def _listeners(self, hook: str) -> list[Middleware]:
        """The middleware that want to hear of `hook` (read per batch: the chain may change)."""
        if self._chain is None:
            return []
        return [m for m in self._chain if m.overrides(hook)]

    def _length(self, h: Held) -> float:
        """The job's lease length, or what is left of the backend's maximum visibility."""
        limit = self._max_visibility
        if limit is None:
            return h.visibility_timeout
        left = limit - (time.monotonic() - h.leased_at)
        if left >= h.visibility_timeout:
            return h.visibility_timeout
        h.capped = True
        m = h.ctx.message
        logs.logger.warning(
            "lease of message %s (job %s) reached the backend's maximum visibility of %.0fs; "
            "it is no longer extended and the message will be delivered again in %.0fs",
            m.id,
            m.job,
            limit,
            max(0.0, left),
        )
        return max(0.0, left)

    def _lose(self, lost: list[Held]) -> None:
        with self._mutex:
            for h in lost:
                self._held.discard(h)
        listeners = self._listeners("lease_lost")
        for h in lost:
            self.lost += 1
            for listener in listeners:
                _tell(listener.lease_lost, h.ctx)
            h.ctx.lease_lost = True
            h.ctx.request_stop("lease lost")
            m = h.ctx.message
            logs.event("lease lost", **logs.message_fields(m.queue, m.job, m.id, m.attempt))


def _tell(hook: Callable[..., None], *args: object) -> None:
    """Call a middleware's keeper hook; its failure must not stop the keeper."""
    try:
        hook(*args)
    except Exception:
        logs.logger.exception("middleware hook %s failed", getattr(hook, "__qualname__", hook))
