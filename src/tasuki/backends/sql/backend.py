"""`SQLBackend`: the message lifecycle of the SQL engines, written once over a `Dialect`.

SQLite and PostgreSQL store messages the same way — one row per message in every state,
`visible_at` meaning "ready at" while waiting and "lease expires at" while in flight, a
finished-ids table for the id window, a locks table — so the lifecycle is one piece of
Python, by concern: `producing` (enqueue), `leasing`, `settling` (settle, extend,
keep), `cancelling`, `operating` (stats, dead letters, inspect, redrive, purge), `locks`,
and the maintenance services. An engine plugs in as a `Dialect` (`dialect.py`) and nothing else: its
differences are its named queries and the hooks the dialect declares.

Times passed to the queries (`now`) come from `clock`, one instant per transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    CancelStatus,
    Delivery,
    Enqueued,
    Envelope,
    Keep,
    LeaseStatus,
    MaintenanceService,
    MessageInfo,
    QueueStats,
    Receipt,
    Reliability,
    Settle,
    SettledTotals,
    SignalStatus,
    StepRecord,
    Taken,
    Waiting,
)
from tasuki.backends.sql import (
    cancelling,
    console,
    durable,
    flows,
    leasing,
    operating,
    producing,
    results,
    settling,
)
from tasuki.backends.sql.dialect import Dialect, Queries
from tasuki.backends.sql.locks import SQLLockStore
from tasuki.backends.sql.maintenance.console import ConsoleCleaner
from tasuki.backends.sql.maintenance.durable import DurableCleaner
from tasuki.backends.sql.maintenance.expired import ExpiredCleaner
from tasuki.backends.sql.maintenance.flows import FlowsCleaner
from tasuki.backends.sql.maintenance.history import HistoryCleaner
from tasuki.backends.sql.maintenance.limits import LimitsCleaner
from tasuki.backends.sql.maintenance.results import ResultsCleaner
from tasuki.backends.sql.steps import add_meters
from tasuki.core.console import BrowseState, JobStats, JobTally, Listed, Page, WorkerInfo
from tasuki.core.flowrecords import FlowRecord, ResultRecord
from tasuki.core.message import DeadLetter


class SQLBackend(Backend):
    """The message lifecycle over a `Dialect`. See the module docstring."""

    def __init__(self, url: str, dialect: Dialect, clock: Callable[[], float] = time.time):
        self.url = url
        self.dialect = dialect
        self.capabilities = dialect.capabilities
        self.clock = clock
        self._locks = SQLLockStore(dialect)
        self._ahead = leasing.Ahead() if dialect.leases_ahead else None
        # What the workers run for this store (`Backend.maintenance`); an engine's
        # backend may add its own.
        self.services: list[MaintenanceService] = [
            ExpiredCleaner(dialect, self._now),
            HistoryCleaner(dialect, self._now),
            ResultsCleaner(dialect, self._now),
            FlowsCleaner(dialect, self._now),
            LimitsCleaner(dialect, self._now),
            ConsoleCleaner(dialect, self._now),
            DurableCleaner(dialect, self._now),
        ]

    def _now(self) -> float:
        return self.clock()  # read at each call: tests set `clock` after construction

    @property
    def q(self) -> Queries:
        """The dialect's named queries."""
        return self.dialect.queries

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        return producing.enqueue(
            self.dialect, envelopes, self._now, connection, self.priority_aging
        )

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        return leasing.lease(self.dialect, queue, max_messages, visibility_timeout, wait, self._now)

    def lease_soon(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    ) -> Callable[[], list[Delivery]]:
        """Where a lease is a round trip (`Dialect.leases_ahead`), the next batch is
        leased on a helper thread while the worker runs the current one: the round trip
        and the server's work overlap the jobs."""
        if self._ahead is None:
            return super().lease_soon(queue, max_messages, visibility_timeout)
        return self._ahead.submit(lambda: self.lease(queue, max_messages, visibility_timeout))

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        return settling.settle(self.dialect, items, self._now, self.priority_aging)

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        return settling.extend(self.dialect, receipts, visibility_timeout, self._now)

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        return settling.keep(self.dialect, items, self._now)

    def cancel(self, queue: str, id: str) -> CancelStatus:
        return cancelling.cancel(self.dialect, queue, id, self._now)

    # -- results ---------------------------------------------------------------------
    def result(self, queue: str, id: str) -> ResultRecord | None:
        return results.read(self.dialect, queue, id, self._now)

    def wait_result(self, queue: str, id: str, timeout: float) -> ResultRecord | None:
        return results.wait(self.dialect, queue, id, timeout, self._now)

    # -- workflows -------------------------------------------------------------------
    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        return flows.start(self.dialect, record, envelopes, self._now, self.priority_aging)

    def flow(self, flow_id: str) -> FlowRecord | None:
        return flows.read(self.dialect, flow_id, self._now)

    def wait_flow(self, flow_id: str, timeout: float) -> FlowRecord | None:
        return flows.wait(self.dialect, flow_id, timeout, self._now)

    def cancel_flow(self, flow_id: str) -> bool:
        return flows.cancel(self.dialect, flow_id, self._now)

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        return flows.group_value(self.dialect, flow_id, barrier, self._now)

    # -- durable steps -----------------------------------------------------------------
    def steps(self, queue: str, id: str) -> list[StepRecord]:
        return durable.steps(self.dialect, queue, id)

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        return durable.record_step(self.dialect, receipt, record)

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        return durable.take_signal(self.dialect, receipt, name, occurrence, self._now())

    def signal(self, queue: str, id: str, name: str, payload: bytes) -> SignalStatus:
        return durable.signal(self.dialect, queue, id, name, payload, self._now())

    def waiting(self, queue: str, id: str) -> Waiting | None:
        return durable.waiting(self.dialect, queue, id, self._now())

    def record_step_in_transaction(
        self, receipt: Receipt, work: Callable[[Any], StepRecord]
    ) -> StepRecord | None:
        return durable.in_transaction_or_none(self.dialect, receipt, work)

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str) -> QueueStats:
        return operating.stats(self.dialect, queue, self.clock())

    def queues(self) -> list[str]:
        return operating.queues(self.dialect)

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return operating.dead_letters(self.dialect, queue, limit, offset)

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        return operating.dead_letter(self.dialect, queue, id)

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        return operating.in_flight(self.dialect, queue, limit, self.clock())

    def settled_totals(self, queue: str) -> SettledTotals:
        return operating.settled_totals(self.dialect, queue)

    def reliability(self, queue: str) -> Reliability:
        return operating.reliability(self.dialect, queue)

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:
        meters = {k: v for k, v in increments.items() if v}
        if meters:
            with self.dialect.statements() as conn:
                add_meters(conn, self.dialect, queue, meters)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        return operating.inspect(self.dialect, queue, id, self.clock())

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        return operating.redrive(self.dialect, queue, ids, self._now)

    def purge_dead(self, queue: str) -> int:
        return operating.purge_dead(self.dialect, queue)

    def purge(self, queue: str) -> int:
        return operating.purge(self.dialect, queue)

    # -- the console (`sql/console.py`) -------------------------------------------------------
    def pause(self, queue: str) -> None:
        console.pause(self.dialect, queue, self.clock())

    def resume(self, queue: str) -> None:
        console.resume(self.dialect, queue)

    def paused(self) -> set[str]:
        return console.paused(self.dialect)

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
        return console.browse(
            self.dialect, queue, state, job, newest_first, limit, cursor, self.clock()
        )

    def retry_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        return console.retry_many(self.dialect, queue, ids, state, self._now)

    def cancel_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        return console.cancel_many(self.dialect, queue, ids, state, self._now)

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally] = ()) -> bool:
        return console.announce(self.dialect, info, tallies, self.clock())

    def workers(self) -> list[WorkerInfo]:
        return console.workers(self.dialect, self.clock())

    def stop_worker(self, id: str) -> bool:
        return console.stop_worker(self.dialect, id)

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        return console.stats(self.dialect, queue, window, self.clock())

    @property
    def locks(self) -> SQLLockStore:
        return self._locks

    def maintenance(self) -> Sequence[MaintenanceService]:
        return self.services

    def ping(self) -> None:
        self.dialect.ping()

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
        self.dialect.close()
