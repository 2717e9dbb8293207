"""The lease keeper: keeps the leases of running jobs (one loop, one thread).

A lease is kept (`Backend.keep`: extended, with the job's latest progress) once a third
of its visibility timeout has passed, so a job may run for hours while its worker lives,
and its message is redelivered within one visibility timeout of the worker's death. The
backend answers for each lease:
- "lost": another delivery owns the message now; the job is told to stop and its
  result is never acked with the stale token;
- "cancelled": the message was cancelled (`app.cancel`); the job sees `ctx.cancelled`
  and `ctx.should_stop`, and the run settles nothing (its token is fenced out anyway).
A cancel is thus learnt within a third of the lease, or within `WATCH_EVERY` for a job
that looks for a stop (`ctx.should_stop`, `wait_for_stop`, `ctx.cancelled`): only those
leases are kept more often, so a job that never looks costs nothing more.
A backend with a maximum visibility (SQS: 12 hours from receipt)
gets extensions up to it and no further, with a log line: the message is then delivered
again when that lease lapses.

An outage is retried at the next tick. Any other failure of a `keep` call is one lease's:
the batch is split until it is found (`blame.py`), the others are kept; that one is kept
again without its progress (a note the engine refused), and if that fails `GIVE_UP`
ticks running, it is no longer kept, with a log line: its message is delivered again
when the lease lapses.

How late each extension was (the heartbeat lag) goes to the middleware that listen
(`lease_extended`) and, summed per queue, to the backend's reliability meters every
`REPORT_EVERY` seconds and when the keeper stops, so that a dashboard in another
process shows it (`tasuki.core.reliability`): one small write per queue, off the hot path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from tasuki import logs
from tasuki.backends.base import Backend, Keep, LeaseStatus, Progress
from tasuki.core import reliability
from tasuki.errors import BackendUnavailable, TasukiError
from tasuki.runtime.blame import named, split_until_found
from tasuki.runtime.fatal import Fatal
from tasuki.runtime.outage import Outage
from tasuki.runtime.pulse import Pulse

if TYPE_CHECKING:
    from tasuki.core.context import Context
    from tasuki.middleware.base import Middleware, MiddlewareChain

MIN_TICK = 0.01
MAX_TICK = 0.5
RETRY_TICK = 0.1
REPORT_EVERY = 5.0
# How often a lease whose job looks for a stop is kept, at most (a cancel's latency).
WATCH_EVERY = 1.0
# A keep failing with a backend error (no outage) this many ticks running is split.
PASSING = 5
# `blame`'s answer for a lease that could not be kept this tick, and how many ticks in a
# row that may happen before the lease is given up.
UNKEPT = "unkept"
GIVE_UP = 3


@dataclass(eq=False, slots=True)
class Held:
    """A running delivery whose lease the keeper looks after."""

    ctx: Context
    visibility_timeout: float
    extended_at: float
    keeper: LeaseKeeper
    leased_at: float = 0.0
    capped: bool = False
    # The progress the backend has stored for this lease (sent with a keep it held).
    progress_sent: Progress | None = None
    # Keeps of this lease alone that failed in a row (`LeaseKeeper._blame`).
    failures: int = 0

    def extend(self, seconds: float) -> bool:
        """`ctx.extend()`: extend this lease at once."""
        return self.keeper.extend_now(self, seconds)

    @property
    def due_at(self) -> float:
        every = self.visibility_timeout / 3.0
        watch = self.keeper.watch_every
        if watch is not None and every > watch and self.ctx.asked:
            every = watch
        return self.extended_at + every

    def keep(self, visibility_timeout: float) -> Keep:
        """What to ask of `Backend.keep`: the lease, and the progress not yet stored."""
        progress = self.ctx.last_progress
        if progress is self.progress_sent:
            progress = None
        elif progress is not None and not self.keeper.stores_progress:
            self.keeper.progress_dropped()
            progress = None
        return Keep(self.ctx.receipt, visibility_timeout, progress)


class LeaseKeeper:
    def __init__(
        self, backend: Backend, chain: MiddlewareChain | None = None, fatal: Fatal | None = None
    ) -> None:
        self._backend = backend
        self._chain = chain
        caps = backend.capabilities
        self._max_visibility = caps.max_visibility
        # Keeping a lease more often only tells a job of a cancel sooner where there is one.
        self.watch_every = WATCH_EVERY if caps.cancel else None
        self.stores_progress = caps.progress
        self._progress_warned = False
        self._held: set[Held] = set()
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self.lost = 0
        self.cancelled = 0
        self._next_wake = 0.0
        self._outage = Outage("extending leases")
        self._reports = backend.capabilities.reliability_counts
        self._lags: dict[str, dict[str, int]] = {}  # queue -> meters not yet reported
        self._lags_mutex = threading.Lock()
        self._report_at = time.monotonic() + REPORT_EVERY
        self.pulse = Pulse("lease keeper")
        self._failures = 0
        self.fatal = fatal or Fatal()
        self._thread = threading.Thread(
            target=self.fatal.guard("lease keeper", self._run),
            name="tasuki-lease-keeper",
            daemon=True,
        )
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
        item = held.keep(seconds)
        asked = time.time()
        status = self._backend.keep([item])[0]
        if status == "held":
            held.ctx.lease_until = asked + seconds
            held.extended_at = time.monotonic() + max(0.0, seconds - held.visibility_timeout)
            held.progress_sent = item.progress or held.progress_sent
        else:
            self._end([held], [status])
        return status == "held"

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
            except Exception as exc:
                if last:
                    logs.logger.warning("heartbeat lags of queue %s not reported: %s", queue, exc)
                    continue
                with self._lags_mutex:
                    reliability.add(self._lags.setdefault(queue, {}), meters)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self.pulse.beat()
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
        """One `keep` call for the due leases (per lease length), each with its progress."""
        items = [h.keep(self._length(h)) for h in due]
        started, asked = time.monotonic(), time.time()
        try:
            try:
                results: list[LeaseStatus | str] = list(self._backend.keep(items))
            except BackendUnavailable:
                raise
            except TasukiError as exc:
                self._failures += 1
                if self._failures < PASSING:  # a fault of this call, perhaps passing
                    raise
                results = split_until_found(items, self._keep, self._blame, exc)
            except Exception as exc:  # a bug, or a value the engine refuses
                results = split_until_found(items, self._keep, self._blame, exc)
        except TasukiError as exc:
            self._outage.failed(exc)
            return
        self._failures = 0
        self._outage.worked()
        ended: list[tuple[Held, LeaseStatus]] = []
        listeners = self._listeners("lease_extended")
        lags: list[tuple[str, float]] = []
        for h, item, answer in zip(due, items, results, strict=True):
            if answer == UNKEPT:
                h.failures += 1
                if h.failures >= GIVE_UP:
                    h.capped = True  # not kept again: it lapses, and is delivered again
                    logs.logger.error(
                        "the lease of message %s cannot be kept: it is no longer extended "
                        "and the message will be delivered again when it lapses",
                        h.ctx.message.id,
                    )
                continue
            h.failures = 0
            progress = item.progress
            if answer == "no progress":
                h.progress_sent = h.ctx.last_progress  # refused: not sent again
                progress = None
            status = cast("LeaseStatus", "held" if answer == "no progress" else answer)
            if status != "held":
                ended.append((h, status))
                continue
            lag = max(0.0, started - h.due_at)
            h.extended_at = started
            h.ctx.lease_until = asked + item.visibility_timeout
            if progress is not None:
                h.progress_sent = progress
            lags.append((h.ctx.message.queue, lag))
            for m in listeners:
                _tell(m.lease_extended, h.ctx, lag)
        if self._reports and lags:
            with self._lags_mutex:
                for queue, lag in lags:
                    reliability.observe(self._lags.setdefault(queue, {}), reliability.LAG, lag)
        if ended:
            self._end([h for h, _ in ended], [status for _, status in ended])

    def _keep(self, items: Sequence[Keep]) -> list[LeaseStatus | str]:
        return list(self._backend.keep(items))

    def _blame(self, item: Keep, error: Exception) -> LeaseStatus | str:
        """The one lease the backend would not keep: again without its progress, or never."""
        logs.logger.error(
            "keeping the lease of message %s failed: %s", item.receipt.id, named(error)
        )
        if item.progress is not None:
            try:
                status = self._backend.keep([item._replace(progress=None)])[0]
            except Exception as again:
                error = again
            else:
                logs.logger.warning(
                    "the progress of message %s cannot be stored (%s): dropped",
                    item.receipt.id,
                    named(error),
                )
                return "no progress" if status == "held" else status
        return UNKEPT

    def progress_dropped(self) -> None:
        """A job reported progress that this backend cannot store: say so, once."""
        if not self._progress_warned:
            self._progress_warned = True
            logs.logger.warning(
                "%s; ctx.progress() is not shown",
                self._backend.refusal("progress", "store progress", "its notes are dropped"),
            )

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

    def _end(self, helds: list[Held], statuses: list[LeaseStatus]) -> None:
        """Leases the backend no longer holds for their runs: lost, or cancelled. A lease
        discarded while its keep was under way belongs to a run that is over and being
        settled: the keep met that settle (on SQS, a visibility change of a message its
        own ack deleted is refused), not another delivery, so it is no lost lease."""
        with self._mutex:
            ending = [(h, s) for h, s in zip(helds, statuses, strict=True) if h in self._held]
        helds, statuses = [h for h, _ in ending], [s for _, s in ending]
        lost = [h for h, status in zip(helds, statuses, strict=True) if status == "lost"]
        cancelled = [h for h, status in zip(helds, statuses, strict=True) if status != "lost"]
        if lost:
            self._lose(lost)
        if cancelled:
            with self._mutex:
                for h in cancelled:
                    self._held.discard(h)
            for h in cancelled:
                self.cancelled += 1
                h.ctx.mark_cancelled()
                m = h.ctx.message
                logs.event("cancelled", **logs.message_fields(m.queue, m.job, m.id, m.attempt))

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
