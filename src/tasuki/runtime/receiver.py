"""From a leased delivery to a task ready to run; or, for one that cannot run, to the
finisher (`finisher.py`), which decides every message's end.

Nothing a delivery carries is believed before it is checked: with signing on, the
signature first (a message this app did not sign is refused before any of its headers is
read), then every `tasuki-*` header (`core/headers.py`). A delivery that cannot run never
reaches a job: a bad signature or header, an unknown job, an undecodable body or plan go
to the dead letters with that reason; a message whose attempts by its job's own policy
are used up (a crash loop: its earlier leases lapsed) too; a message that is early (a
long delay travelling in hops) goes back without penalty for its next hop. A delivery
that breaks the reading itself (a bug) is dead-lettered with what broke, and the rest of
its batch runs; one whose reading met a backend error is retried (an attempt counted).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.backends.base import Delivery, LockStore
from tasuki.core import headers as tasuki_headers
from tasuki.core.codec import Codec
from tasuki.core.context import Context
from tasuki.core.flows import StepPlan
from tasuki.core.job import Job
from tasuki.core.message import (
    FLOW_HEADER,
    JOB_HEADER,
    NOT_BEFORE_HEADER,
    Lease,
    delivered,
)
from tasuki.core.registry import Registry
from tasuki.core.steps import Durable
from tasuki.core.text import storable
from tasuki.errors import BackendError, SerializationError, SignatureError, UnknownJob
from tasuki.runtime.flows import FlowSteps
from tasuki.runtime.heartbeat import Held, LeaseKeeper
from tasuki.runtime.task import Task

if TYPE_CHECKING:
    from tasuki.runtime.finisher import Finisher

# A hop lands this close to its time runs now rather than taking another hop.
HOP_SLACK = 0.5
# A delivery whose reading met a backend error is retried after this long.
RETRY_READ = 1.0


class Receiver:
    def __init__(
        self,
        registry: Registry,
        codec: Codec,
        keeper: LeaseKeeper,
        finisher: Finisher,
        locks: LockStore,
        max_delay: float | None = None,
        flows: FlowSteps | None = None,
        durable: Durable | None = None,
    ) -> None:
        self.registry = registry
        self.codec = codec
        self.keeper = keeper
        self.finisher = finisher
        self.locks = locks
        self.max_delay = max_delay
        self.flows = flows
        self.durable = durable

    def receive_many(self, deliveries: list[Delivery], asked: float | None = None) -> list[Task]:
        """Tasks for the deliveries that will run; the others went to the finisher.
        `asked`: when their lease was asked for (wall clock), from which each lasts its
        length at the earliest (`Context.lease_until`; unknown if None)."""
        log_received = logs.enabled("received")
        tasks = []
        for d in deliveries:
            try:
                task = self._receive(d, log_received)
                if task is not None and asked is not None:
                    task.ctx.lease_until = asked + d.visibility_timeout
            except BackendError as exc:  # a flow's group value not read now: try again
                self.finisher.retry(d, RETRY_READ, exc)
                continue
            except Exception as exc:
                logs.logger.exception("internal error reading message %s", storable(d.id))
                self.finisher.refuse(d, f"the worker could not read it: {_named(exc)}", exc)
                continue
            if task is not None:
                tasks.append(task)
        if tasks:
            self.keeper.add_many([t.held for t in tasks])
            if any(t.held.visibility_timeout != t.granted for t in tasks):
                self.keeper.wake()  # a lease to bring to the job's own length at once
        return tasks

    def _receive(self, d: Delivery, log_received: bool) -> Task | None:
        headers = d.headers
        codec = self.codec
        if codec.signs:
            try:
                codec.verify(d.queue, headers, d.body)
            except SignatureError as exc:
                self.finisher.refuse(d, "refused: bad signature", exc)
                return None
        bad = tasuki_headers.problem(headers)
        if bad is not None:
            self.finisher.refuse(d, f"refused: bad {bad}", ValueError(f"bad {bad}"))
            return None
        name = headers.get(JOB_HEADER)
        if log_received:
            logs.event("received", **logs.message_fields(d.queue, name, d.id, d.attempt))
        if NOT_BEFORE_HEADER in headers and self._early(d):
            return None
        plan = None
        if FLOW_HEADER in headers:
            try:
                plan = FlowSteps.plan_of(headers)
            except ValueError as exc:
                self.finisher.refuse(d, "undecodable workflow plan", exc)
                return None
        if name is None:
            job = self.registry.consumers.get(d.queue)
            if job is None:
                exc2 = UnknownJob(f"no consumer for raw messages on queue {d.queue!r}")
                self.finisher.refuse(d, str(exc2), exc2)
                return None
            if self._exhausted(d, job):
                return None
            message = d.to_message()
        else:
            found = self.registry.jobs.get(name)
            if found is None or found.consumer:
                exc3 = UnknownJob(f"unknown job {name!r}")
                self.finisher.refuse(d, str(exc3), exc3)
                return None
            job = found
            if self._exhausted(d, job, plan):
                return None
            try:
                args, kwargs = codec.decode_payload(headers, d.body)
            except SerializationError as exc:
                self.finisher.refuse(d, "undecodable message", exc)
                return None
            if plan is not None and self.flows is not None:
                try:
                    args = self.flows.arguments(plan, args)
                except ValueError as exc:
                    self.finisher.refuse(d, str(exc), exc, plan)
                    return None
            message = delivered(
                d.id,
                d.queue,
                d.body,
                headers,
                d.attempt,
                d.enqueued_at,
                name,
                args,
                kwargs,
                Lease(d.token, d.fencing_token, d.visibility_timeout),
                d.max_attempts,
            )
        # The worker's own job definition decides the lease length: a producer running
        # older code may have enqueued the message with another one. Such a lease is
        # marked as extended long ago, so the keeper extends it to the job's length at once.
        vt = job.visibility_timeout
        now = time.monotonic()
        ctx = Context(message, job, locks=self.locks, durable=self.durable)
        ctx.started_at = time.time()
        held = Held(ctx, vt, now - vt if vt != d.visibility_timeout else now, self.keeper, now)
        ctx.set_extender(held.extend)
        task = Task(ctx, job, held, d.receipt)
        task.flow = plan
        return task

    def _exhausted(self, d: Delivery, job: Job[..., Any], plan: StepPlan | None = None) -> bool:
        """The job's policy governs the attempts, whatever limit the producer stamped."""
        return self.finisher.exhausted(d, job, plan)

    def _early(self, d: Delivery) -> bool:
        """A long delay's hop landed before its time: back without penalty, for the next.
        The header was checked (`core/headers.py`): a finite time."""
        remaining = float(d.headers[NOT_BEFORE_HEADER]) - time.time()
        if remaining <= HOP_SLACK:
            return False
        hop = remaining if self.max_delay is None else min(remaining, self.max_delay)
        self.finisher.back(d, hop)
        return True


def _named(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
