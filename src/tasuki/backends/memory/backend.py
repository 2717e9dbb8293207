"""`memory://`'s `MemoryBackend`: the parts joined over one `Store` (store.py), by concern
as on the other engines: `producing` (enqueue), `leasing`, `settling` (settle, keep,
extend), `cancelling`, `durable` (step records, signals, waits), `operating` (stats,
dead letters, inspect, redrive, purge), with results and flows in `flows`
(`FlowStore`), limits in `limits` (`Admission`) and locks in `locks`. Every change is
made under the store's one lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    CancelStatus,
    Capabilities,
    Delivery,
    Enqueued,
    Envelope,
    Keep,
    LeaseStatus,
    MessageInfo,
    QueueStats,
    Receipt,
    Reliability,
    ResultRecord,
    Settle,
    SettledTotals,
    SignalStatus,
    StepRecord,
    Taken,
    Waiting,
)
from tasuki.backends.memory import (
    cancelling,
    console,
    durable,
    leasing,
    operating,
    producing,
    settling,
)
from tasuki.backends.memory.locks import MemoryLockStore
from tasuki.backends.memory.store import Store
from tasuki.core.console import BrowseState, JobStats, JobTally, Listed, Page, WorkerInfo
from tasuki.core.flowrecords import FlowRecord
from tasuki.core.message import DeadLetter

_SHARED: dict[str, MemoryBackend] = {}
_SHARED_MUTEX = threading.Lock()


class MemoryBackend(Backend):
    capabilities = Capabilities(
        max_message_size=16 * 1024 * 1024,
        cross_process=False,
        results=True,
        workflows=True,
        priorities=True,
        rate_limits=True,
        concurrency_limits=True,
        cancel=True,
        progress=True,
        durable_steps=True,
        pause=True,
        browsing=True,
        browse_waiting=True,
        worker_registry=True,
        job_stats=True,
    )

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._store = Store()
        self._console = console.Registry()

    @classmethod
    def shared(cls, name: str) -> MemoryBackend:
        """The process-wide store called `name` (`memory://name`)."""
        with _SHARED_MUTEX:
            backend = _SHARED.get(name)
            if backend is None:
                backend = _SHARED[name] = cls(f"memory://{name}")
            return backend

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        self.refuse_connection(connection)
        store = self._store
        with store.mutex:
            results = producing.enqueue(store, envelopes, time.time())
            store.changed.notify_all()
        return results

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        return leasing.lease(
            self._store, queue, max_messages, visibility_timeout, wait, self.priority_aging
        )

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        return settling.settle(self._store, items, self.priority_aging)

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        return settling.extend(self._store, receipts, visibility_timeout)

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        return settling.keep(self._store, items)

    def cancel(self, queue: str, id: str) -> CancelStatus:
        return cancelling.cancel(self._store, queue, id, self.priority_aging)

    # -- results and workflows -------------------------------------------------------
    def result(self, queue: str, id: str) -> ResultRecord | None:
        store = self._store
        with store.mutex:
            return store.flows.result(queue, id, time.time())

    def wait_result(self, queue: str, id: str, timeout: float) -> ResultRecord | None:
        store = self._store
        deadline = time.monotonic() + timeout
        with store.mutex:
            while True:
                found = store.flows.result(queue, id, time.time())
                remaining = deadline - time.monotonic()
                if found is None or found.state != "pending" or remaining <= 0:
                    return found
                store.changed.wait(remaining)

    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        store = self._store
        with store.mutex:
            now = time.time()
            if not store.flows.start(record, now):
                return False
            producing.enqueue(store, envelopes, now)
            store.changed.notify_all()
            return True

    def flow(self, flow_id: str) -> FlowRecord | None:
        store = self._store
        with store.mutex:
            return store.flows.flow(flow_id, time.time())

    def wait_flow(self, flow_id: str, timeout: float) -> FlowRecord | None:
        store = self._store
        deadline = time.monotonic() + timeout
        with store.mutex:
            while True:
                found = store.flows.flow(flow_id, time.time())
                remaining = deadline - time.monotonic()
                done = found is None or found.result is not None or found.failure is not None
                if done or (found is not None and found.cancelled) or remaining <= 0:
                    return found
                store.changed.wait(remaining)

    def cancel_flow(self, flow_id: str) -> bool:
        store = self._store
        with store.mutex:
            return store.flows.cancel(flow_id, time.time())

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        store = self._store
        with store.mutex:
            return store.flows.group_value(flow_id, barrier, time.time())

    # -- durable steps ---------------------------------------------------------------
    def steps(self, queue: str, id: str) -> list[StepRecord]:
        return durable.steps(self._store, queue, id)

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        return durable.record_step(self._store, receipt, record)

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        return durable.take_signal(self._store, receipt, name, occurrence)

    def signal(self, queue: str, id: str, name: str, payload: bytes) -> SignalStatus:
        return durable.signal(self._store, queue, id, name, payload, self.priority_aging)

    def waiting(self, queue: str, id: str) -> Waiting | None:
        return durable.waiting(self._store, queue, id)

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str) -> QueueStats:
        return operating.stats(self._store, queue)

    def queues(self) -> list[str]:
        return operating.queues(self._store)

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return operating.dead_letters(self._store, queue, limit, offset)

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        return operating.in_flight(self._store, queue, limit)

    def settled_totals(self, queue: str) -> SettledTotals:
        return operating.settled_totals(self._store, queue)

    def reliability(self, queue: str) -> Reliability:
        return operating.reliability(self._store, queue)

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:
        operating.add_meters(self._store, queue, increments)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        return operating.inspect(self._store, queue, id)

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        return operating.redrive(self._store, queue, ids)

    def purge_dead(self, queue: str) -> int:
        return operating.purge_dead(self._store, queue)

    def purge(self, queue: str) -> int:
        return operating.purge(self._store, queue, self.priority_aging)

    # -- the console (`memory/console.py`) ---------------------------------------------
    def pause(self, queue: str) -> None:
        console.pause(self._store, self._console, queue)

    def resume(self, queue: str) -> None:
        console.resume(self._store, self._console, queue)

    def paused(self) -> set[str]:
        return console.paused(self._store, self._console)

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
        return console.browse(self._store, queue, state, job, newest_first, limit, cursor)

    def retry_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        return console.retry_many(self._store, queue, ids, state)

    def cancel_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        return console.cancel_many(self._store, queue, ids, state, self.priority_aging)

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally] = ()) -> bool:
        return console.announce(self._store, self._console, info, tallies)

    def workers(self) -> list[WorkerInfo]:
        return console.workers(self._store, self._console)

    def stop_worker(self, id: str) -> bool:
        return console.stop_worker(self._store, self._console, id)

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        return console.stats(self._store, self._console, queue, window)

    @property
    def locks(self) -> MemoryLockStore:
        return self._store.locks
