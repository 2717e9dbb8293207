"""The finisher: from a run's outcome to exactly one settle: ack, release (a retry or a
deferral) or dead; or to none, when the lease was lost or the message cancelled.

The way out of the middleware chain runs first, so middleware sees, and may change, the
outcome; an error that no middleware decided on is retried by the default rule
(`core/failure.py`), so no message is ever left without a fate.
"""

from __future__ import annotations

from tasuki import logs
from tasuki.backends.base import Settle
from tasuki.core import results
from tasuki.core.failure import decide_failure
from tasuki.core.flowrecords import Effects
from tasuki.core.flows import StepPlan
from tasuki.core.message import ErrorInfo
from tasuki.core.outcome import Outcome
from tasuki.errors import InvalidArgument, SerializationError, TasukiError
from tasuki.runtime.chain import ChainDriver
from tasuki.runtime.flows import FlowSteps
from tasuki.runtime.heartbeat import LeaseKeeper
from tasuki.runtime.settler import Settler
from tasuki.runtime.task import Task


class Finisher:
    def __init__(
        self,
        chain: ChainDriver,
        settler: Settler,
        keeper: LeaseKeeper,
        flows: FlowSteps | None = None,
    ) -> None:
        self.chain = chain
        self.settler = settler
        self.keeper = keeper
        self.flows = flows

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
        if ctx.lease_lost or outcome.action == "cancel":
            return  # another delivery owns the message, or none will: its token is stale
        if outcome.action is None:
            if outcome.error is None:
                outcome.action = "ack"
            else:
                decide_failure(ctx, outcome)
        action = outcome.action
        receipt = task.receipt
        if action == "defer" and ctx.waiting is not None:
            # A durable run suspended at a sleep or a wait for a signal (`core/steps.py`).
            self.settler.put(Settle.suspend(receipt, outcome.delay, ctx.waiting), task)
            return
        plan = task.flow
        if plan is not None and self.flows is not None:
            self._settle_step(task, outcome, plan, self.flows)
        elif action in ("ack", "skip"):
            kept = outcome.kept
            if kept is None and task.job.keep_result:
                kept = b"null"  # skipped, or acked by the way out: the record must settle
            effects = None if kept is None else Effects(result=kept)
            self.settler.put(Settle.ack(receipt, effects), task)
        elif action == "defer":
            self.settler.put(Settle.release(receipt, outcome.delay, penalty=False), task)
        elif action == "retry":
            failure = outcome.error
            error = None if failure is None else ErrorInfo(type(failure).__name__, str(failure))
            self.settler.put(Settle.release(receipt, outcome.delay, error=error), task)
        else:
            error = ErrorInfo.from_exception(outcome.error) if outcome.error else None
            self.settler.put(Settle.dead(receipt, outcome.reason, error), task)

    def _settle_step(self, task: Task, outcome: Outcome, plan: StepPlan, flows: FlowSteps) -> None:
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
                self._dead_step(task, plan, flows, reason, ErrorInfo.from_exception(exc))
                return
            self.settler.put(Settle.ack(receipt, effects), task)
        elif action == "defer":
            self.settler.put(Settle.release(receipt, outcome.delay, penalty=False), task)
        elif action == "retry":
            failure = outcome.error
            info = None if failure is None else ErrorInfo(type(failure).__name__, str(failure))
            self.settler.put(Settle.release(receipt, outcome.delay, error=info), task)
        else:
            last = ErrorInfo.from_exception(outcome.error) if outcome.error else None
            self._dead_step(task, plan, flows, outcome.reason, last)

    def _dead_step(
        self, task: Task, plan: StepPlan, flows: FlowSteps, reason: str, error: ErrorInfo | None
    ) -> None:
        m = task.ctx.message
        effects = flows.failed(plan, m.job or task.job.name, m.queue, m.id, error)
        self.settler.put(Settle.dead(task.receipt, reason, error, effects), task)

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
