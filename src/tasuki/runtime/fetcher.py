"""The fetcher: leases messages only when there is a free slot to start them.

Slots are reserved *before* leasing, so a busy worker never holds leases it cannot start
(another worker could be running them). When its queue is empty a fetcher keeps a
single slot and blocks in the backend's `lease(wait=...)`, which wakes as soon as a
message arrives, instead of polling.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tasuki import logs
from tasuki.backends.base import Backend, Delivery, Settle
from tasuki.errors import TasukiError
from tasuki.runtime.fatal import Fatal
from tasuki.runtime.outage import Outage
from tasuki.runtime.pulse import Pulse

# How long a busy fetcher waits for a quarter of the slots to free up before leasing.
LINGER = 0.002
# How long a fetcher of a paused queue waits before it looks again.
PAUSED_NAP = 0.1


class Slots:
    """How many more messages this worker may hold; one per running job.

    Given back once per finished job, so `give_back` is on the hot path: it notifies
    only when someone waits (the fetcher, or a stopping worker) and enough is free.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._want = 1
        self._waiters = 0
        self._notified = False
        self._cond = threading.Condition(threading.Lock())

    @property
    def busy(self) -> int:
        return self.size - self._free

    def contended(self) -> bool:
        """Someone is waiting for a free slot."""
        return self._waiters > 0

    def _wait_for(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Condition.wait_for, counting waiters and resetting `_notified` before each wait."""
        if ready():
            return True
        deadline = time.monotonic() + timeout
        self._waiters += 1
        try:
            while not ready():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._notified = False
                self._cond.wait(remaining)
            return True
        finally:
            self._waiters -= 1

    def reserve(self, most: int, timeout: float, gather: int = 1, linger: float = 0.0) -> int:
        """Take up to `most` free slots, waiting up to `timeout` for at least one.

        With fewer than `gather` free, wait up to `linger` more for others to free up:
        a busy worker then leases in batches instead of one message per finished job,
        which is what keeps a network backend's round trips off the hot path.
        """
        with self._cond:
            if self._free == 0 and not self._wait_for(lambda: self._free > 0, timeout):
                return 0
            if self._free < gather and linger > 0:
                self._want = gather
                self._wait_for(lambda: self._free >= gather, linger)
                self._want = 1
            n = min(most, self._free)
            self._free -= n
            return n

    def give_back(self, n: int = 1) -> None:
        if n <= 0:
            return
        with self._cond:
            self._free += n
            # Once notified, waiters need no more notifies until one of them waits again.
            if (
                self._waiters
                and not self._notified
                and (self._free >= self._want or self._free == self.size)
            ):
                self._notified = True
                self._cond.notify_all()

    def wait_all_free(self, timeout: float) -> bool:
        with self._cond:
            return self._wait_for(lambda: self._free == self.size, timeout)


class Fetcher:
    def __init__(
        self,
        backend: Backend,
        queue: str,
        slots: Slots,
        dispatch: Callable[[list[Delivery], float], None],
        stopping: threading.Event,
        *,
        visibility_timeout: float,
        batch_size: int,
        wait: float,
        paused: Callable[[str], bool] | None = None,
        fatal: Fatal | None = None,
    ) -> None:
        self.backend = backend
        self.queue = queue
        self.slots = slots
        self.dispatch = dispatch
        self._ahead_asked = 0.0
        self.stopping = stopping
        self.visibility_timeout = visibility_timeout
        self.batch_size = batch_size
        self.wait = wait
        # Whether the queue is paused now (`runtime/pauses.py`): then nothing is leased.
        self.paused = paused
        self.empty = False
        self.gather = max(1, min(batch_size, slots.size // 4))
        self.outage = Outage(f"leasing from queue {queue!r}")
        self.pulse = Pulse(f"fetcher {queue}")
        self.fatal = fatal or Fatal()
        self._thread = threading.Thread(
            target=self.fatal.guard(f"fetcher of queue {queue!r}", self._run),
            name=f"tasuki-fetch-{queue}",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        backoff = 0.1
        # The next batch, asked for before the current one ran: (slots, finish the lease).
        ahead: tuple[int, Callable[[], list[Delivery]]] | None = None
        while not self.stopping.is_set():
            self.pulse.beat()
            if ahead is None and self.paused is not None and self.paused(self.queue):
                self.empty = True
                with self.pulse.idle():
                    self.stopping.wait(PAUSED_NAP)
                continue
            if ahead is None:
                reserved = self.slots.reserve(
                    self.batch_size, timeout=0.2, gather=self.gather, linger=LINGER
                )
                if reserved == 0:
                    continue
                finish = None
            else:
                (reserved, finish), ahead = ahead, None
            try:
                # When the lease was asked for: it lasts from then at the earliest, what
                # a run frozen after its lease measures its deadline by (`lease_until`).
                asked = self._ahead_asked if finish is not None else time.time()
                if finish is not None:
                    leased = finish()
                elif not self.empty:
                    leased = self.backend.lease(self.queue, reserved, self.visibility_timeout)
                else:
                    leased = []  # idle last round: straight to the waiting lease
                if not leased:
                    # A waiting lease takes what is there at once, so an idle fetcher
                    # skips the quick look: on a backend that bills requests (SQS) the
                    # look would double what an idle worker costs.
                    self.empty = True
                    self.slots.give_back(reserved - 1)
                    reserved = 1
                    asked = time.time()
                    leased = self.backend.lease(
                        self.queue, 1, self.visibility_timeout, wait=self.wait
                    )
            except Exception as exc:
                if not isinstance(exc, TasukiError):
                    # A bug (a backend error not turned into a TasukiError): said with
                    # its traceback, then retried like an outage. Left to end the thread,
                    # it would leave a worker that looks alive and never fetches again.
                    logs.logger.exception("internal error leasing from queue %r", self.queue)
                self.slots.give_back(reserved)
                self.outage.failed(exc, backoff)
                with self.pulse.idle():  # backing off from a failing backend: alive
                    self.stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            self.outage.worked()
            self.slots.give_back(reserved - len(leased))
            if not leased:
                if self.slots.contended():
                    # Another queue's fetcher waits for the slot this one just gave back
                    # (concurrency below the number of queues): let it take its turn.
                    time.sleep(0.001)
                continue
            self.empty = False
            if self.stopping.is_set():
                self._hand_back(leased)
                continue
            if len(leased) == reserved > 1:
                ahead = self._ask_ahead()
            try:
                self.dispatch(leased, asked)
            except Exception:
                # A bug, not a job's failure (the runtime settles those): keep fetching;
                # what this batch held is released at shutdown or lapses and is redelivered.
                logs.logger.exception("internal error dispatching %d messages", len(leased))
            finally:
                if ahead is not None and self.stopping.is_set():
                    self._settle_ahead(ahead)
                    ahead = None
        if ahead is not None:
            self._settle_ahead(ahead)

    def _ask_ahead(self) -> tuple[int, Callable[[], list[Delivery]]] | None:
        """A full batch means a backlog: ask for the next one now, with the slots free now
        (never waiting for more), so the backend works while this thread runs jobs."""
        reserved = self.slots.reserve(self.batch_size, timeout=0.0)
        if reserved == 0:
            return None
        try:
            self._ahead_asked = time.time()
            return reserved, self.backend.lease_soon(self.queue, reserved, self.visibility_timeout)
        except TasukiError:
            self.slots.give_back(reserved)
            return None  # the next turn of the loop leases the usual way and reports errors

    def _settle_ahead(self, ahead: tuple[int, Callable[[], list[Delivery]]]) -> None:
        """Stopping with a lease under way: finish it and hand its messages straight back."""
        reserved, finish = ahead
        try:
            leased = finish()
        except TasukiError as exc:
            logs.logger.warning("a lease under way at shutdown failed: %s", exc)
            leased = []
        self.slots.give_back(reserved - len(leased))
        if leased:
            self._hand_back(leased)

    def _hand_back(self, leased: list[Delivery]) -> None:
        """Leased just as the worker began to stop: give them straight back, no penalty."""
        try:
            self.backend.settle([Settle.release(d.receipt, penalty=False) for d in leased])
        except TasukiError as exc:
            logs.logger.warning("could not hand back %d messages: %s", len(leased), exc)
        self.slots.give_back(len(leased))
        time.sleep(0)
