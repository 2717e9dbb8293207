"""A backend wrapper that injects outages, for testing what the worker does when the
backend misbehaves: operations that fail, that are applied but whose answer is lost,
that stall, and then recover.

    from tasuki.testing import FaultyBackend

    faulty = FaultyBackend(backend_from_url(url))
    faulty.fail("ack", times=3)            # the next 3 acks raise, nothing applied
    faulty.lose_reply("ack", times=1)      # applied, but the caller sees an error
    faulty.stall("lease", seconds=0.5)     # every lease sleeps first
    faulty.recover()                       # back to normal
    app = tasuki.App(url, backend=faulty)

Only in-process: it wraps a backend object, it is not a URL scheme.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    CancelStatus,
    Delivery,
    Enqueued,
    Envelope,
    FlowRecord,
    Keep,
    LeaseStatus,
    LockStore,
    MessageInfo,
    QueueStats,
    Receipt,
    Reliability,
    ResultRecord,
    Settle,
    SettledTotals,
)
from tasuki.core.console import BrowseState, JobStats, JobTally, Listed, Page, WorkerInfo
from tasuki.core.message import DeadLetter
from tasuki.errors import BackendUnavailable

T = TypeVar("T")
# "ack", "release" and "dead" name the settle calls that carry an item of that verdict.
OPERATIONS = (
    "enqueue",
    "lease",
    "settle",
    "ack",
    "release",
    "dead",
    "extend",
    "stats",
    "ping",
    "paused",
    "announce",
)


@dataclass
class _Fault:
    kind: str  # "fail" | "lose_reply" | "stall"
    remaining: int | None  # None: until recover()
    seconds: float = 0.0
    error: Exception | None = None


class FaultyBackend(Backend):
    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.url = f"faulty+{inner.url}"
        self.capabilities = inner.capabilities
        self._faults: dict[str, list[_Fault]] = {}
        self._mutex = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()

    # -- the controls ----------------------------------------------------------------
    def _add(self, operation: str, fault: _Fault) -> None:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {OPERATIONS}")
        with self._mutex:
            self._faults.setdefault(operation, []).append(fault)

    def fail(self, operation: str, times: int | None = 1, error: Exception | None = None) -> None:
        """The next `times` calls raise without reaching the backend: `error`, or
        `BackendUnavailable` (any other exception stands for a bug in a backend)."""
        self._add(operation, _Fault("fail", times, error=error))

    def lose_reply(self, operation: str, times: int | None = 1) -> None:
        """The next `times` calls are applied, then raise as if the answer was lost."""
        self._add(operation, _Fault("lose_reply", times))

    def stall(self, operation: str, seconds: float, times: int | None = None) -> None:
        """Calls sleep `seconds` before going through."""
        self._add(operation, _Fault("stall", times, seconds=seconds))

    def recover(self) -> None:
        with self._mutex:
            self._faults.clear()

    def _next_fault(self, operation: str) -> _Fault | None:
        with self._mutex:
            self.calls[operation] += 1
            queue = self._faults.get(operation)
            if not queue:
                return None
            fault = queue[0]
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    queue.pop(0)
            self.injected[operation] += 1
            return fault

    def _call(self, operation: str, call: Callable[[], T]) -> T:
        fault = self._next_fault(operation)
        if fault is None:
            return call()
        error = fault.error or BackendUnavailable(f"injected fault: {operation} {fault.kind}")
        if fault.kind == "fail":
            raise error
        if fault.kind == "stall":
            time.sleep(fault.seconds)
            return call()
        call()
        raise error

    # -- the backend, passed through ---------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        return self._call("enqueue", lambda: self.inner.enqueue(envelopes, connection))

    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        return self._call(
            "lease", lambda: self.inner.lease(queue, max_messages, visibility_timeout, wait)
        )

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        operation = "settle"
        with self._mutex:
            for verdict in ("ack", "release", "dead"):
                if self._faults.get(verdict) and any(i.verdict == verdict for i in items):
                    operation = verdict
                    break
        return self._call(operation, lambda: self.inner.settle(items))

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        return self._call("extend", lambda: self.inner.extend(receipts, visibility_timeout))

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        # The lease keeper's call: the faults named "extend" apply to it.
        return self._call("extend", lambda: self.inner.keep(items))

    def cancel(self, queue: str, id: str) -> CancelStatus:
        return self.inner.cancel(queue, id)

    @property
    def priority_aging(self) -> float:
        return self.inner.priority_aging

    @priority_aging.setter
    def priority_aging(self, seconds: float) -> None:
        self.inner.priority_aging = seconds

    def result(self, queue: str, id: str) -> ResultRecord | None:
        return self.inner.result(queue, id)

    def wait_result(self, queue: str, id: str, timeout: float) -> ResultRecord | None:
        return self.inner.wait_result(queue, id, timeout)

    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        return self.inner.start_flow(record, envelopes)

    def flow(self, flow_id: str) -> FlowRecord | None:
        return self.inner.flow(flow_id)

    def wait_flow(self, flow_id: str, timeout: float) -> FlowRecord | None:
        return self.inner.wait_flow(flow_id, timeout)

    def cancel_flow(self, flow_id: str) -> bool:
        return self.inner.cancel_flow(flow_id)

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        return self.inner.group_value(flow_id, barrier)

    def stats(self, queue: str) -> QueueStats:
        return self._call("stats", lambda: self.inner.stats(queue))

    def queues(self) -> list[str]:
        return self.inner.queues()

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return self.inner.dead_letters(queue, limit, offset)

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        return self.inner.dead_letter(queue, id)

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        return self.inner.in_flight(queue, limit)

    def settled_totals(self, queue: str) -> SettledTotals | None:
        return self.inner.settled_totals(queue)

    def reliability(self, queue: str) -> Reliability | None:
        return self.inner.reliability(queue)

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:
        self.inner.add_meters(queue, increments)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        return self.inner.inspect(queue, id)

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        return self.inner.redrive(queue, ids)

    def purge_dead(self, queue: str) -> int:
        return self.inner.purge_dead(queue)

    def purge(self, queue: str) -> int:
        return self.inner.purge(queue)

    # -- the console: what workers call (`paused`, `announce`) can fail; the rest passes --
    def pause(self, queue: str) -> None:
        self.inner.pause(queue)

    def resume(self, queue: str) -> None:
        self.inner.resume(queue)

    def paused(self) -> set[str]:
        return self._call("paused", self.inner.paused)

    def browse(
        self,
        queue: str,
        state: BrowseState,
        *,
        job: str | None = None,
        newest_first: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Listed]:
        return self.inner.browse(
            queue, state, job=job, newest_first=newest_first, limit=limit, cursor=cursor
        )

    def retry_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        return self.inner.retry_many(queue, ids, state)

    def cancel_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        return self.inner.cancel_many(queue, ids, state)

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally] = ()) -> bool:
        return self._call("announce", lambda: self.inner.announce(info, tallies))

    def workers(self) -> list[WorkerInfo]:
        return self.inner.workers()

    def stop_worker(self, id: str) -> bool:
        return self.inner.stop_worker(id)

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        return self.inner.job_stats(queue, window)

    @property
    def locks(self) -> LockStore:
        return self.inner.locks

    def ping(self) -> None:
        self._call("ping", self.inner.ping)

    def close(self) -> None:
        self.inner.close()

    def __getstate__(self) -> Any:
        raise TypeError("a FaultyBackend lives in one process")
