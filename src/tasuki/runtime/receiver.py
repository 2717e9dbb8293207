"""From a leased delivery to a task ready to run, or straight to its settlement.

A delivery that cannot run never reaches a job: a bad signature, an unknown job, an
undecodable body go to the dead letters with that reason; a message whose attempts by its
job's own policy are used up (a crash loop: its earlier leases lapsed) too; a message
that is early (a long delay travelling in hops) goes back without penalty for its next hop.
"""

from __future__ import annotations

import time
from typing import Any

from tasuki import logs
from tasuki.backends.base import Delivery, LockStore, Settle
from tasuki.core.codec import Codec
from tasuki.core.context import Context
from tasuki.core.flowrecords import Effects
from tasuki.core.flows import StepPlan
from tasuki.core.job import Job
from tasuki.core.message import (
    FLOW_HEADER,
    JOB_HEADER,
    NOT_BEFORE_HEADER,
    ErrorInfo,
    Lease,
    delivered,
)
from tasuki.core.reasons import LEASE_EXPIRED, describe, exhausted
from tasuki.core.registry import Registry
from tasuki.core.steps import Durable
from tasuki.errors import SerializationError, SignatureError, UnknownJob
from tasuki.runtime.flows import FlowSteps
from tasuki.runtime.heartbeat import Held, LeaseKeeper
from tasuki.runtime.settler import Settler
from tasuki.runtime.task import Task

# A hop lands this close to its time runs now rather than taking another hop.
HOP_SLACK = 0.5


class Receiver:
    def __init__(
        self,
        registry: Registry,
        codec: Codec,
        keeper: LeaseKeeper,
        settler: Settler,
        locks: LockStore,
        max_delay: float | None = None,
        flows: FlowSteps | None = None,
        durable: Durable | None = None,
    ) -> None:
        self.registry = registry
        self.codec = codec
        self.keeper = keeper
        self.settler = settler
        self.locks = locks
        self.max_delay = max_delay
        self.flows = flows
        self.durable = durable

    def receive_many(self, deliveries: list[Delivery]) -> list[Task]:
        """Tasks for the deliveries that will run; the others are settled here."""
        log_received = logs.enabled("received")
        tasks = []
        for d in deliveries:
            if log_received:
                name = d.headers.get(JOB_HEADER)
                logs.event("received", **logs.message_fields(d.queue, name, d.id, d.attempt))
            task = self._receive(d)
            if task is not None:
                tasks.append(task)
        if tasks:
            self.keeper.add_many([t.held for t in tasks])
            if any(t.held.visibility_timeout != t.granted for t in tasks):
                self.keeper.wake()  # a lease to bring to the job's own length at once
        return tasks

    def _receive(self, d: Delivery) -> Task | None:
        headers = d.headers
        if NOT_BEFORE_HEADER in headers and self._early(d):
            return None
        codec = self.codec
        if codec.signs:
            try:
                codec.verify(d.queue, headers, d.body)
            except SignatureError as exc:
                self._dead_letter(d, "refused: bad signature", exc)
                return None
        name = headers.get(JOB_HEADER)
        plan = None
        if FLOW_HEADER in headers:
            try:
                plan = FlowSteps.plan_of(headers)
            except ValueError as exc:
                self._dead_letter(d, "undecodable workflow plan", exc)
                return None
        if name is None:
            job = self.registry.consumers.get(d.queue)
            if job is None:
                exc2 = UnknownJob(f"no consumer for raw messages on queue {d.queue!r}")
                self._dead_letter(d, str(exc2), exc2)
                return None
            if self._exhausted(d, job):
                return None
            message = d.to_message()
        else:
            found = self.registry.jobs.get(name)
            if found is None or found.consumer:
                exc3 = UnknownJob(f"unknown job {name!r}")
                self._dead_letter(d, str(exc3), exc3)
                return None
            job = found
            if self._exhausted(d, job, plan):
                return None
            try:
                args, kwargs = codec.decode_payload(headers, d.body)
            except SerializationError as exc:
                self._dead_letter(d, "undecodable message", exc)
                return None
            if plan is not None and self.flows is not None:
                try:
                    args = self.flows.arguments(plan, args)
                except ValueError as exc:
                    self._dead_letter(d, str(exc), exc, plan)
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
        held = Held(ctx, vt, now - vt if vt != d.visibility_timeout else now, self.keeper, now)
        ctx.set_extender(held.extend)
        task = Task(ctx, job, held, d.receipt)
        task.flow = plan
        return task

    def _exhausted(self, d: Delivery, job: Job[..., Any], plan: StepPlan | None = None) -> bool:
        """The job's policy governs the attempts, whatever limit the producer stamped."""
        if not exhausted(d.attempt - 1, job.retry.max_attempts):
            return False
        # Its earlier leases were not settled by a run that failed (that run's Retries
        # would have dead-lettered it at the limit): they lapsed.
        reason = describe(LEASE_EXPIRED, d.attempt - 1, job.retry.max_attempts)
        fields = logs.message_fields(d.queue, job.name, d.id, d.attempt)
        logs.event("dead-lettered", **fields, reason=reason)
        self.settler.put(Settle.dead(d.receipt, reason, None, self._failed(d, plan)), fields)
        return True

    def _early(self, d: Delivery) -> bool:
        """A long delay's hop landed before its time: back without penalty, for the next."""
        try:
            not_before = float(d.headers[NOT_BEFORE_HEADER])
        except ValueError:
            return False
        remaining = not_before - time.time()
        if remaining <= HOP_SLACK:
            return False
        hop = remaining if self.max_delay is None else min(remaining, self.max_delay)
        fields = logs.message_fields(d.queue, d.headers.get(JOB_HEADER), d.id, d.attempt)
        self.settler.put(Settle.release(d.receipt, hop, penalty=False), fields)
        return True

    def _dead_letter(
        self, d: Delivery, reason: str, error: BaseException, plan: StepPlan | None = None
    ) -> None:
        fields = logs.message_fields(d.queue, d.headers.get(JOB_HEADER), d.id, d.attempt)
        logs.event("dead-lettered", **fields, reason=reason)
        info = ErrorInfo(type(error).__name__, str(error), "")
        self.settler.put(Settle.dead(d.receipt, reason, info, self._failed(d, plan, info)), fields)

    def _failed(
        self, d: Delivery, plan: StepPlan | None, error: ErrorInfo | None = None
    ) -> Effects | None:
        """A flow step dead-lettered before it ran fails its flow like one that ran."""
        if plan is None or self.flows is None:
            return None
        return self.flows.failed(plan, d.headers.get(JOB_HEADER, ""), d.queue, d.id, error)
