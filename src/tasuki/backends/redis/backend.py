"""`redis://`, `rediss://`, `unix://` — many machines, high throughput.

Every state change is one Lua script per queue per call (`lua/*.lua`, one file per
operation), so the lifecycle is enforced by Redis atomically and nothing here does
read-modify-write. Times are the Redis server's clock, read inside the scripts; callers
pass durations. Python's part is to group a batch by queue, flatten it into ARGV, call
the script by SHA and turn the flat reply into values: one round trip per queue per
batch, whatever the batch size (up to `CHUNK` messages per script call, so one call
never holds Redis for long). See docs/redis.md for the whole design.

`RedisBackend` only joins the parts, by concern as on the SQL engines: `producing`
(enqueue), `leasing`, `settling` (settle, keep, extend), `cancelling`, `results`,
`flows` (start, read, wait on and cancel flows, and check a step's effects),
`durable` (step records, signals and waits), `console` (pauses, listings, bulk
actions, the worker registry, job stats),
`operating` (counts, dead letters, inspection, redrive, purge) and `locks`, each over
the one `Plumbing` (the connection, the key space, the script calls). The logic of each
is in its `.lua` file, the mapping of records to arguments and of replies to records in
`codec/`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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
    Settle,
    SettledTotals,
    SignalStatus,
    StepRecord,
    Taken,
    Waiting,
)
from tasuki.backends.redis import (
    cancelling,
    console,
    durable,
    leasing,
    operating,
    producing,
    results,
    settling,
)
from tasuki.backends.redis.connection import Connection
from tasuki.backends.redis.flows import Flows
from tasuki.backends.redis.keys import KeySpace
from tasuki.backends.redis.locks import RedisLockStore
from tasuki.backends.redis.options import RedisOptions
from tasuki.backends.redis.plumbing import Plumbing
from tasuki.backends.redis.scripts import Script
from tasuki.core.console import BrowseState, JobStats, JobTally, Listed, Page, WorkerInfo
from tasuki.core.flowrecords import FlowRecord, ResultRecord
from tasuki.core.message import DeadLetter


class RedisBackend(Backend):
    """The Backend interface on Redis (or Redis Cluster); `from_url` builds one."""

    def __init__(self, options: RedisOptions) -> None:
        self.url = options.url
        self.capabilities = Capabilities(
            max_message_size=options.max_message_size,
            results=True,
            priorities=True,
            cancel=True,
            progress=True,
            rate_limits=True,
            concurrency_limits=True,
            workflows=True,
            durable_steps=True,
            pause=True,
            browsing=True,
            browse_waiting=True,
            worker_registry=True,
            job_stats=True,
        )
        self.redis = Plumbing(options)
        self.keys: KeySpace = self.redis.keys
        self._flows = Flows(self.redis)
        self._locks = RedisLockStore(self.redis)

    # What reaches this backend's server from outside its parts: tests and tools read
    # keys with `_command`; the records SQS keeps in a Redis lock store
    # (sqs/records/redis.py) call all four.
    def _command(self, *args: Any) -> Any:
        return self.redis.command(*args)

    def _eval(self, script: str | Script, keys: list[str], args: list[Any]) -> Any:
        return self.redis.eval(script, keys, args)

    def _connection(self) -> Connection:
        return self.redis.connection()

    @property
    def _options(self) -> RedisOptions:
        return self.redis.options

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        self.refuse_connection(connection)
        return producing.enqueue(self.redis, envelopes, self.priority_aging)

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        return leasing.lease(self.redis, queue, max_messages, visibility_timeout, wait)

    def lease_soon(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    ) -> Callable[[], list[Delivery]]:
        """The lease script sent now, its reply read later: Redis leases the next batch
        while the worker runs the current one."""
        return leasing.lease_soon(self.redis, queue, max_messages, visibility_timeout)

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        return settling.settle(self.redis, self._flows, items, self.priority_aging)

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        return settling.keep(self.redis, items)

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        return settling.extend(self.redis, receipts, visibility_timeout)

    def cancel(self, queue: str, id: str) -> CancelStatus:
        return cancelling.cancel(self.redis, queue, id)

    # -- results ---------------------------------------------------------------------
    def result(self, queue: str, id: str) -> ResultRecord | None:
        return results.read(self.redis, queue, id)

    def wait_result(self, queue: str, id: str, timeout: float) -> ResultRecord | None:
        return results.wait(self.redis, queue, id, timeout)

    # -- workflows -------------------------------------------------------------------
    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        return self._flows.start(record, envelopes, self.priority_aging)

    def flow(self, flow_id: str) -> FlowRecord | None:
        return self._flows.read(flow_id)

    def wait_flow(self, flow_id: str, timeout: float) -> FlowRecord | None:
        return self._flows.wait(flow_id, timeout)

    def cancel_flow(self, flow_id: str) -> bool:
        return self._flows.cancel(flow_id)

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        return self._flows.group_value(flow_id, barrier)

    # -- durable steps ---------------------------------------------------------------
    def steps(self, queue: str, id: str) -> list[StepRecord]:
        return durable.steps(self.redis, queue, id)

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        return durable.record_step(self.redis, receipt, record)

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        return durable.take_signal(self.redis, receipt, name, occurrence)

    def signal(self, queue: str, id: str, name: str, payload: bytes) -> SignalStatus:
        return durable.signal(self.redis, queue, id, name, payload)

    def waiting(self, queue: str, id: str) -> Waiting | None:
        return durable.waiting(self.redis, queue, id)

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str) -> QueueStats:
        return operating.stats(self.redis, queue)

    def queues(self) -> list[str]:
        return operating.queues(self.redis)

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return operating.dead_letters(self.redis, queue, limit, offset)

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        return operating.dead_letter(self.redis, queue, id)

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        return operating.in_flight(self.redis, queue, limit)

    def settled_totals(self, queue: str) -> SettledTotals:
        return operating.settled_totals(self.redis, queue)

    def reliability(self, queue: str) -> Reliability:
        return operating.reliability(self.redis, queue)

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:
        operating.add_meters(self.redis, queue, increments)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        return operating.inspect(self.redis, queue, id)

    def inspect_body(
        self, queue: str, id: str
    ) -> tuple[MessageInfo, bytes | None, Mapping[str, str]]:
        return operating.inspect_body(self.redis, queue, id)

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        return operating.redrive(self.redis, queue, ids)

    def purge_dead(self, queue: str) -> int:
        return operating.purge_dead(self.redis, queue)

    def purge(self, queue: str) -> int:
        return operating.purge(self.redis, queue)

    # -- the console -----------------------------------------------------------------
    def pause(self, queue: str) -> None:
        console.pause(self.redis, queue)

    def resume(self, queue: str) -> None:
        console.resume(self.redis, queue)

    def paused(self) -> set[str]:
        return console.paused(self.redis)

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
        return console.browse(self.redis, queue, state, job, newest_first, limit, cursor)

    def browse_matching(
        self,
        queue: str,
        state: BrowseState,
        match: Mapping[str, Any],
        *,
        job: str | None = None,
        newest_first: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Listed] | None:
        """Filtered in browse.lua as it walks, at most `console.MATCH_WALK` messages a call."""
        rules = console.match_rules(match)
        if not rules:
            return None
        return console.browse(self.redis, queue, state, job, newest_first, limit, cursor, rules)

    def retry_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        return console.retry_many(self.redis, queue, ids, state)

    def cancel_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        return console.cancel_many(self.redis, queue, ids, state)

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally] = ()) -> bool:
        return console.announce(self.redis, info, tallies)

    def workers(self) -> list[WorkerInfo]:
        return console.workers(self.redis)

    def stop_worker(self, id: str) -> bool:
        return console.stop_worker(self.redis, id)

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        return console.read_job_stats(self.redis, queue, window, time.time())

    @property
    def locks(self) -> RedisLockStore:
        return self._locks

    def ping(self) -> None:
        self.redis.command("PING")

    def close(self) -> None:
        self.redis.close()
