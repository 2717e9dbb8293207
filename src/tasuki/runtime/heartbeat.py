"""The lease keeper: extends the leases of running jobs, and enforces their deadlines.

A lease is extended once a third of its visibility timeout has passed, so a job may run
for hours while its worker lives, and its message is redelivered within one visibility
timeout of the worker's death. An extension refused by the backend means another
delivery owns the message now: the job is told to stop and its result is never acked
with the stale token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tasuki import logs
from tasuki.backends.base import Backend, LockStore
from tasuki.errors import TasukiError
from tasuki.runtime.outage import Outage

if TYPE_CHECKING:
    from tasuki.context import Context

MIN_TICK = 0.01
MAX_TICK = 0.5
RETRY_TICK = 0.1


@dataclass(eq=False, slots=True)
class Held:
    """A running delivery whose lease the keeper looks after."""

    ctx: Context
    visibility_timeout: float
    extended_at: float
    keeper: LeaseKeeper
    on_deadline: Callable[[], None] | None = None
    deadline_fired: bool = False

    def extend(self, seconds: float) -> bool:
        """`ctx.extend()`: extend this lease at once."""
        return self.keeper.extend_now(self, seconds)

    @property
    def due_at(self) -> float:
        return self.extended_at + self.visibility_timeout / 3.0


class LeaseKeeper:
    def __init__(self, backend: Backend, locks: LockStore | None = None) -> None:
        self._backend = backend
        self._locks = locks if locks is not None else backend.locks
        self._held: set[Held] = set()
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self.lost = 0
        self._next_wake = 0.0
        self._outage = Outage("extending leases")
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
        """Re-plan now: a running job just got a deadline."""
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

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.clear()
            due, expired, _ = self._plan(time.monotonic())
            for h in expired:
                h.deadline_fired = True
                if h.on_deadline is not None:
                    h.on_deadline()
            if due:
                self._extend(due)
            now = time.monotonic()
            still_due, _, next_at = self._plan(now, publish=True)
            if still_due:  # the backend refused to answer: try again soon
                next_at = min(next_at, now + RETRY_TICK)
            self._wake.wait(max(MIN_TICK, next_at - now))

    def _plan(self, now: float, publish: bool = False) -> tuple[list[Held], list[Held], float]:
        """Leases due for extension, deadlines passed, and when the next of either comes."""
        due: list[Held] = []
        expired: list[Held] = []
        next_at = now + MAX_TICK
        with self._mutex:
            for h in self._held:
                if h.due_at <= now:
                    due.append(h)
                else:
                    next_at = min(next_at, h.due_at)
                deadline = h.ctx.deadline
                if deadline is not None and not h.deadline_fired:
                    if deadline <= now:
                        expired.append(h)
                    else:
                        next_at = min(next_at, deadline)
            # Until the loop has planned its sleep, any add must wake it.
            self._next_wake = next_at if publish else now
        return due, expired, next_at

    def _extend(self, due: list[Held]) -> None:
        by_vt: dict[float, list[Held]] = {}
        for h in due:
            by_vt.setdefault(h.visibility_timeout, []).append(h)
        for vt, group in by_vt.items():
            started = time.monotonic()
            try:
                results = self._backend.extend([h.ctx.receipt for h in group], vt)
            except TasukiError as exc:
                self._outage.failed(exc)
                continue
            self._outage.worked()
            lost = []
            for h, ok in zip(group, results, strict=True):
                if ok:
                    h.extended_at = started
                else:
                    lost.append(h)
            if lost:
                self._lose(lost)
            self._renew_locks(group)

    def _renew_locks(self, group: list[Held]) -> None:
        """Locks held for a running job (dedup, uniqueness) live exactly as long as its lease."""
        for h in group:
            for key, owner in list(h.ctx.held_locks):
                try:
                    ok = self._locks.renew([key], owner, h.visibility_timeout)[0]
                except TasukiError as exc:
                    logs.logger.warning("renewing lock %s failed: %s", key, exc)
                    continue
                if not ok:
                    logs.logger.warning("lock %s lapsed while its job ran", key)

    def _lose(self, lost: list[Held]) -> None:
        with self._mutex:
            for h in lost:
                self._held.discard(h)
        for h in lost:
            self.lost += 1
            h.ctx.lease_lost = True
            h.ctx.request_stop("lease lost")
            m = h.ctx.message
            logs.event("lease lost", **logs.message_fields(m.queue, m.job, m.id, m.attempt))
