"""The finisher: the one place that decides how a message ends. From a run's outcome to
exactly one settle: ack, release (a retry or a deferral) or dead; or to none, when the
lease was lost or the message cancelled. A delivery that never ran (refused by the
receiver, out of attempts, or early for a long delay's next hop) ends here too.

The way out of the middleware chain runs first, so middleware sees, and may change, the
outcome; an error that no middleware decided on is retried by the default rule
(`core/failure.py`), so no message is ever left without a fate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tasuki import logs
from tasuki.backends.base import Delivery, Settle
from tasuki.core import results
from tasuki.core.console import Outcome as RunOutcome
from tasuki.core.console import Tallies
from tasuki.core.failure import decide_failure
from tasuki.core.flowrecords import Effects
from tasuki.core.flows import StepPlan
from tasuki.core.job import Job
from tasuki.core.message import JOB_HEADER, ErrorInfo
from tasuki.core.outcome import Outcome
from tasuki.core.reasons import LEASE_EXPIRED, describe, exhausted
from tasuki.errors import InvalidArgument, SerializationError, TasukiError
from tasuki.runtime.chain import ChainDriver
from tasuki.runtime.flows import FlowSteps
from tasuki.runtime.heartbeat import LeaseKeeper
from tasuki.runtime.settler import Settler
from tasuki.runtime.task import Task

# The settles a job's stats count, by what they count as.
_COUNTED: dict[str | None, RunOutcome] = {"ack": "succeeded", "retry": "retried", "dead": "dead"}


class Finisher:
    def __init__(
        self,
        chain: ChainDriver,
        settler: Settler,
        keeper: LeaseKeeper,
        flows: FlowSteps | None = None,
        tallies: Tallies | None = None,
    ) -> None:
        self.chain = chain
        self.settler = settler
        self.keeper = keeper
        self.flows = flows
        # The job stats this worker's announcer writes (`core/console.py`).
        self.tallies = tallies

    def complete(self, task: Task, outcome: Outcome) -> None:
        """The run is over: through the chain's way out, then settled (unless claimed)."""
        if not task.claim():
            return  # settled already: released at shutdown, or given up after a timeout
        if task.ctx.cancelled:
            # Whatever the run did, none of it counts: the middleware sees a final outcome
            # that is no success (a dedup guard is not marked done, a unique lock is freed).
            outcome.error = None
            outcome.decide("cancel", reason="cancelled")
        elif isinstance(outcome.error, TypeError) and outcome.action is None:
            _check_fit(task, outcome)
        elif (
            (task.job.keep_result or task.flow is not None)
            and outcome.error is None
            and outcome.action is None
        ):
            # A flow step's result goes on to the next step or its group, kept or not.
            _keep(task, outcome)
        self.chain.after(task, outcome)
        # The lease is the settle's from here: a keep still under way that meets the
        # settle done (the message acked, say) tells nothing about this run.
        self.keeper.discard(task.held)
        self.settle(task, outcome)

    def settle(self, task: Task, outcome: Outcome) -> None:
        ctx = task.ctx
        acked = _acked(outcome)
        if ctx.lease_lost or outcome.action == "cancel":
            if acked is not None:
                acked(False)
            return  # another delivery owns the message, or none will: its token is stale
        if outcome.action is None:
            if outcome.error is None:
                outcome.action = "ack"
            else:
                decide_failure(ctx, outcome)
        action = outcome.action
        if self.tallies is not None and action in _COUNTED:
            now = time.time()
            self.tallies.add(
                ctx.message.queue, task.job.name, _COUNTED[action], now - ctx.started_at, now
            )
        receipt = task.receipt
        if action == "defer" and ctx.waiting is not None:
            # A durable run suspended at a sleep or a wait for a signal (`core/steps.py`).
            self.settler.put(Settle.suspend(receipt, outcome.delay, ctx.waiting), task, acked)
            return
        plan = task.flow
        if plan is not None and self.flows is not None:
            self._settle_step(task, outcome, plan, self.flows, acked)
        elif action in ("ack", "skip"):
            kept = outcome.kept
            if kept is None and task.job.keep_result:
                kept = b"null"  # skipped, or acked by the way out: the record must settle
            effects = None if kept is None else Effects(result=kept)
            self.settler.put(Settle.ack(receipt, effects), task, acked)
        elif action == "defer":
            self.settler.put(Settle.release(receipt, outcome.delay, penalty=False), task, acked)
        elif action == "retry":
            failure = outcome.error
            error = None if failure is None else ErrorInfo(type(failure).__name__, str(failure))
            self.settler.put(Settle.release(receipt, outcome.delay, error=error), task, acked)
        else:
            error = ErrorInfo.from_exception(outcome.error) if outcome.error else None
            self.settler.put(Settle.dead(receipt, outcome.reason, error), task, acked)

    def _settle_step(
        self,
        task: Task,
        outcome: Outcome,
        plan: StepPlan,
        flows: FlowSteps,
        acked: Callable[[bool], None] | None,
    ) -> None:
        """A flow step's settle carries its follow-ups: on the ack, what comes next; on
        the dead letter, the flow's failure. A follow-up that cannot be made (a result
        too large for the next message, a job this worker does not know) fails the step:
        its flow stops there, visibly, rather than hanging."""
        action = outcome.action
        receipt = task.receipt
        if action in ("ack", "skip"):
            try:
                effects = flows.done(plan, outcome.kept or b"null")
            except TasukiError as exc:
                reason = f"the flow's next step cannot be enqueued: {exc}"
                why = ErrorInfo.from_exception(exc)
                self._dead_step(task, plan, flows, reason, why, acked)
                return
            self.settler.put(Settle.ack(receipt, effects), task, acked)
        elif action == "defer":
            self.settler.put(Settle.release(receipt, outcome.delay, penalty=False), task, acked)
        elif action == "retry":
            failure = outcome.error
            info = None if failure is None else ErrorInfo(type(failure).__name__, str(failure))
            self.settler.put(Settle.release(receipt, outcome.delay, error=info), task, acked)
        else:
            last = ErrorInfo.from_exception(outcome.error) if outcome.error else None
            self._dead_step(task, plan, flows, outcome.reason, last, acked)

    def _dead_step(
        self,
        task: Task,
        plan: StepPlan,
        flows: FlowSteps,
        reason: str,
        error: ErrorInfo | None,
        acked: Callable[[bool], None] | None,
    ) -> None:
        m = task.ctx.message
        effects = flows.failed(plan, m.job or task.job.name, m.queue, m.id, error)
        self.settler.put(Settle.dead(task.receipt, reason, error, effects), task, acked)

    # -- deliveries that never ran -------------------------------------------------------
    def refuse(
        self, d: Delivery, reason: str, error: BaseException, plan: StepPlan | None = None
    ) -> None:
        """A delivery that cannot run (a poison message): to the dead letters, with why."""
        fields = _fields(d)
        logs.event("dead-lettered", **fields, reason=reason)
        info = ErrorInfo(type(error).__name__, str(error), "")
        self.settler.put(Settle.dead(d.receipt, reason, info, self._failed(d, plan, info)), fields)

    def exhausted(self, d: Delivery, job: Job[..., Any], plan: StepPlan | None) -> bool:
        """Out of attempts by the job's own policy before it runs: dead, and True."""
        if not exhausted(d.attempt - 1, job.retry.max_attempts):
            return False
        # Its earlier leases were not settled by a run that failed (that run's Retries
        # would have dead-lettered it at the limit): they lapsed.
        reason = describe(LEASE_EXPIRED, d.attempt - 1, job.retry.max_attempts)
        fields = logs.message_fields(d.queue, job.name, d.id, d.attempt)
        logs.event("dead-lettered", **fields, reason=reason)
        self.settler.put(Settle.dead(d.receipt, reason, None, self._failed(d, plan)), fields)
        return True

    def retry(self, d: Delivery, delay: float, error: BaseException) -> None:
        """Not readable now (a backend error): again in `delay` seconds, an attempt spent,
        so one that never becomes readable ends in the dead letters."""
        fields = _fields(d)
        info = ErrorInfo(type(error).__name__, str(error))
        logs.event("retry scheduled", **fields, delay=delay, reason=str(info))
        self.settler.put(Settle.release(d.receipt, delay, error=info), fields)

    def back(self, d: Delivery, delay: float) -> None:
        """Early for a long delay: back without penalty, for its next hop."""
        self.settler.put(Settle.release(d.receipt, delay, penalty=False), _fields(d))

    def _failed(
        self, d: Delivery, plan: StepPlan | None, error: ErrorInfo | None = None
    ) -> Effects | None:
        """A flow step dead-lettered before it ran fails its flow like one that ran."""
        if plan is None or self.flows is None:
            return None
        return self.flows.failed(plan, d.headers.get(JOB_HEADER, ""), d.queue, d.id, error)

    def release_on_shutdown(self, task: Task) -> bool:
        """Hand a still-running job's message back without penalty; True if this did it."""
        if not task.claim():
            return False
        self.keeper.discard(task.held)
        if task.ctx.lease_lost:
            return False
        logs.event("released on shutdown", **task.fields)
        self.settler.put(Settle.release(task.receipt, penalty=False), task)
        return True


def _acked(outcome: Outcome) -> Callable[[bool], None] | None:
    """What must follow this run's ack (`Outcome.when_acked`), as one call, if anything."""
    hooks = outcome.acked_hooks
    if not hooks:
        return None
    if len(hooks) == 1:
        return hooks[0]

    def all_of(landed: bool) -> None:
        for hook in hooks:
            hook(landed)

    return all_of


def _fields(d: Delivery) -> dict[str, Any]:
    return logs.message_fields(d.queue, d.headers.get(JOB_HEADER), d.id, d.attempt)


def _keep(task: Task, outcome: Outcome) -> None:
    """The return value as JSON, for the ack to keep; one that cannot be kept is a failure
    no retry can fix, told before the middleware's way out sees the run as a success."""
    try:
        outcome.kept = results.encode(task.job.name, outcome.result)
    except SerializationError as exc:
        outcome.error = exc
        outcome.decide("dead", reason="return value cannot be kept as JSON")


def _check_fit(task: Task, outcome: Outcome) -> None:
    """A TypeError may mean the message's arguments no longer fit the job (a deploy changed
    its signature): no retry can fix that, so it goes to the dead letters. Checked only
    after a failure, to keep signature binding off the hot path."""
    job, m = task.job, task.ctx.message
    if job.consumer:
        return
    try:
        job.check_arguments(m.args, m.kwargs)
    except InvalidArgument as misfit:
        misfit.__cause__ = outcome.error
        outcome.error = misfit
        outcome.decide("dead", reason="arguments do not fit the job")
