"""`sqs://` — Amazon SQS (or any server that speaks its API), on boto3.

The mapping of the message lifecycle onto SQS, and what SQS cannot promise, is in
docs/backends/sqs.md. In short: a lease is a ReceiveMessage (10 per call, long-polled
when the caller waits), its token the receipt handle; the attempt is SQS's
ApproximateReceiveCount plus the attempts of earlier copies of the message, carried in
the `tasuki` attribute, so a release without penalty (which re-sends the message and
deletes the old copy) gives its attempt back. Delays beyond `max_delay` are the
runtime's: the producer and, for a long release, this backend's re-send stamp the
`tasuki-not-before` header, and the worker's receiver hands an early copy back without
penalty for the next hop. tasuki dead-letters a message itself (send to the dead-letter
queue with reason and error, then delete); the queue's redrive policy is only a
backstop. With `locks=`, the records SQS keeps in that lock store (records/) refuse
stale receipt handles, and its id records make enqueue idempotent; on SQLite and Redis
they also keep cancels, progress, result and workflow records (docs/backends/sqs.md).

Every settling call is batched by 10 (SQS's batch size). A message is always sent to
its new place before it is deleted from the old one, so a crash in between leaves a
duplicate, never a loss.

`SqsBackend` is this module: the Backend interface, each call handed to the part that
does it, all of them on one `Plumbing` (plumbing.py: the client, the batch calls and
moves, the lock store and its records): producing.py (enqueue, its claims, result
records), leasing.py (lease), settling.py (settle, extend, keep, cancel), inspecting.py
(inspect, from the records), flows.py (workflows), durable.py (durable steps),
dead_letters.py (browse, redrive, purge them), console.py (pause, the worker registry,
job stats, in the lock store) and operating.py (stats, purge, ping, close); beside
them codec.py, queues.py, levels.py, limits.py, options.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    CancelStatus,
    Delivery,
    Enqueued,
    Envelope,
    Keep,
    LeaseStatus,
    LockStore,
    MaintenanceService,
    MessageInfo,
    QueueStats,
    Receipt,
    Settle,
    SignalStatus,
    StepRecord,
    Taken,
    Waiting,
)
from tasuki.backends.sqs.console import Console
from tasuki.backends.sqs.dead_letters import DeadLetters
from tasuki.backends.sqs.durable import Durable
from tasuki.backends.sqs.flows import Flows
from tasuki.backends.sqs.inspecting import Inspecting
from tasuki.backends.sqs.leasing import Leasing
from tasuki.backends.sqs.operating import Operating
from tasuki.backends.sqs.options import SqsOptions
from tasuki.backends.sqs.plumbing import Plumbing
from tasuki.backends.sqs.producing import PENDING_CLAIM, Producing
from tasuki.backends.sqs.settling import Settling
from tasuki.core.console import (
    BrowseState,
    JobStats,
    JobTally,
    Listed,
    Page,
    WorkerInfo,
    check_state,
)
from tasuki.core.flowrecords import FlowRecord, FlowStep, ResultRecord
from tasuki.core.message import DeadLetter

__all__ = ["PENDING_CLAIM", "SqsBackend"]


class SqsBackend(Backend):
    """The Backend interface on SQS; `from_url` builds one. See the module."""

    def __init__(self, options: SqsOptions) -> None:
        self.url = options.url
        self.sqs = Plumbing(options, self.refusal)
        self.capabilities = self.sqs.capabilities()
        self.producing = Producing(self.sqs)
        self.flows = Flows(self.sqs, self.producing.produce)
        self.leasing = Leasing(self.sqs)
        self.settling = Settling(self.sqs, self.flows.send_steps)
        self.dead = DeadLetters(self.sqs)
        self.inspecting = Inspecting(self.sqs)
        self.operating = Operating(self.sqs)
        self.durable = Durable(self.sqs)
        self.console = Console(self.sqs)

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        self.refuse_connection(connection)
        return self.producing.produce(envelopes)

    def result(self, queue: str, id: str) -> ResultRecord | None:
        return self.producing.result(queue, id)

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        return self.leasing.lease(
            queue, max_messages, visibility_timeout, wait, self.priority_aging
        )

    def lease_soon(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    ) -> Callable[[], list[Delivery]]:
        return self.leasing.lease_soon(queue, max_messages, visibility_timeout, self.priority_aging)

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        return self.settling.settle(items)

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        return self.settling.extend(receipts, visibility_timeout)

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        """With records that keep progress and cancels (`controls`), settling's; else the
        Backend's default (extend, no progress)."""
        records = self.sqs.records
        if records is None or not records.controls:
            return super().keep(items)
        return self.settling.keep(items)

    def cancel(self, queue: str, id: str) -> CancelStatus:
        return self.settling.cancel(queue, id)

    def inspect_body(
        self, queue: str, id: str
    ) -> tuple[MessageInfo, bytes | None, Mapping[str, str]]:
        return self.inspecting.inspect_body(queue, id)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        """From the lock store's records, as far as they tell (inspecting.py)."""
        return self.inspecting.inspect(queue, id)

    # -- workflows -------------------------------------------------------------------
    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        return self.flows.start_flow(record, envelopes)

    def flow(self, flow_id: str) -> FlowRecord | None:
        return self.flows.flow(flow_id)

    def cancel_flow(self, flow_id: str) -> bool:
        return self.flows.cancel_flow(flow_id)

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        return self.flows.group_value(flow_id, barrier)

    def flow_steps(self, steps: Sequence[FlowStep]) -> list[MessageInfo]:
        return self.flows.flow_steps(steps)

    # -- durable steps (durable.py) --------------------------------------------------
    def steps(self, queue: str, id: str) -> list[StepRecord]:
        return self.durable.steps(queue, id)

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        return self.durable.record_step(receipt, record)

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        return self.durable.take_signal(receipt, name, occurrence)

    def signal(self, queue: str, id: str, name: str, payload: bytes) -> SignalStatus:
        return self.durable.signal(queue, id, name, payload)

    def waiting(self, queue: str, id: str) -> Waiting | None:
        return self.durable.waiting(queue, id)

    # -- dead letters ----------------------------------------------------------------
    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return self.dead.dead_letters(queue, limit, offset)

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        return self.dead.redrive(queue, ids)

    def purge_dead(self, queue: str) -> int:
        return self.dead.purge_dead(queue)

    # -- operating -------------------------------------------------------------------
    def queue_arn(self, queue: str) -> str:
        """The ARN of `queue`'s SQS queue (operating.py)."""
        return self.operating.queue_arn(queue)

    def stats(self, queue: str) -> QueueStats:
        return self.operating.stats(queue)

    def queues(self) -> list[str]:
        return self.operating.queues()

    def purge(self, queue: str) -> int:
        return self.operating.purge(queue)

    # -- the console (console.py) ------------------------------------------------------
    def pause(self, queue: str) -> None:
        self.console.pause(queue)

    def resume(self, queue: str) -> None:
        self.console.resume(queue)

    def paused(self) -> set[str]:
        return self.console.paused()

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
        return self.console.browse(
            queue,
            check_state(state),
            job=job,
            newest_first=newest_first,
            limit=limit,
            cursor=cursor,
        )

    def retry_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        """Dead letters: redriven where still in the dead-letter queue. A delayed message
        is refused (`browse_waiting`): SQS cannot make it visible early."""
        if check_state(state) != "dead":
            return super().retry_many(queue, ids, state)
        refused = self.console.refuse_browse(state)
        if refused is not None:
            raise refused
        sent = set(self.dead.redriven(queue, list(dict.fromkeys(ids))))
        return [id in sent for id in ids]

    def cancel_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        """In flight: cancelled where the lease its in-flight entry names is still the
        current, live lease, compared and cancelled in one step of the lock store (its
        holder is fenced out); a message whose lease was settled since (acked, released,
        retried, asleep) or that another lease holds now is not touched. Dead: removed
        from the dead-letter queue where it is still there."""
        refused = self.console.refuse_browse(check_state(state))
        if refused is not None:
            raise refused
        if state == "dead":
            return self.dead.remove(queue, ids)
        return self.settling.cancel_leases(queue, self.console.listed_leases(queue, ids))

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally] = ()) -> bool:
        return self.console.announce(info, tallies)

    def workers(self) -> list[WorkerInfo]:
        return self.console.workers()

    def stop_worker(self, id: str) -> bool:
        return self.console.stop_worker(id)

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        return self.console.job_stats(queue, window)

    @property
    def locks(self) -> LockStore:
        return self.operating.locks

    def maintenance(self) -> Sequence[MaintenanceService]:
        """The pruning of the console's records in the lock store, where they need it."""
        console = self.sqs.console
        return () if console is None else console.maintenance()

    def ping(self) -> None:
        self.operating.ping()

    def close(self) -> None:
        self.leasing.close()
        self.operating.close()
