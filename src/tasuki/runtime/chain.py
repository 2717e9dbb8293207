"""Drives a run through the middleware chain: the way in before the job, the way out after.

A job's steps are worked out once per chain version (only the middleware that applies to
the job and overrides `execute` or `after`), so a guard for an option the job does not use
costs nothing per message.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.core.admission import START_MARGIN
from tasuki.errors import Defer, Skip
from tasuki.middleware.base import MiddlewareChain, Outcome
from tasuki.runtime.task import Step, Task

if TYPE_CHECKING:
    from tasuki.core.job import Job


# A job with a rate limit starts only this soon after its lease: its token is held for its
# window plus `START_MARGIN` (which also covers the lease's reply), and a later start
# could share a window with the next admissions. Given back without penalty instead: it
# is admitted again at its next token.
LATE_START = START_MARGIN - 0.05


class ChainDriver:
    def __init__(self, chain: MiddlewareChain) -> None:
        self.chain = chain
        # job name -> (chain version, its middleware steps)
        self._plans: dict[str, tuple[int, tuple[Step, ...]]] = {}

    def plan_for(self, job: Job[..., Any]) -> tuple[Step, ...]:
        """The middleware steps of `job`'s runs, outermost first."""
        chain = self.chain
        cached = self._plans.get(job.name)
        if cached is None or cached[0] != chain.version:
            steps = []
            for m in chain:
                execute = m.execute if m.overrides("execute") else None
                after = m.after if m.overrides("after") else None
                if (execute or after) and m.applies_to(job):
                    steps.append((execute, after))
            cached = self._plans[job.name] = (chain.version, tuple(steps))
        return cached[1]

    def before(self, task: Task) -> Outcome | None:
        """Run the steps on the way in; an Outcome if one of them decided the run's fate."""
        if not task.ctx.confirm_held():
            # Held up past the lease before the run began (frozen, or a lease call that
            # stalled): the message may be another delivery's already. Not run, not
            # settled: a run now would be a duplicate the holder's settle cannot stop.
            task.depth = 0
            if logs.enabled("lease lost"):
                logs.event("lease lost", **task.fields, reason="lapsed before the run began")
            return Outcome(action="skip", reason="its lease lapsed before the run began")
        if task.job.rate_limit is not None and _late(task):
            return Outcome(action="defer", delay=0.0, reason="too late a start for its rate")
        ctx = task.ctx
        steps = task.plan = self.plan_for(task.job)
        for depth, (execute, _) in enumerate(steps):
            if execute is None:
                continue
            try:
                gen = execute(ctx)
                if gen is None:
                    continue
                next(gen)
                if task.hooks is None:
                    task.hooks = [(depth, gen)]
                else:
                    task.hooks.append((depth, gen))
            except StopIteration:
                continue
            except Skip as s:
                task.depth = depth
                return Outcome(action="skip", reason=s.reason)
            except Defer as d:
                task.depth = depth
                return Outcome(action="defer", delay=d.delay, reason=d.reason)
            except Exception as exc:
                task.depth = depth
                return Outcome(error=exc)
        task.depth = len(steps)
        return None

    @staticmethod
    def after(task: Task, outcome: Outcome) -> None:
        """The way out, innermost first, through every step the way in got past."""
        if outcome.action is None and outcome.error is None:
            outcome.action = "ack"
        ctx, steps, hooks = task.ctx, task.plan, task.hooks
        for depth in range(task.depth - 1, -1, -1):
            after = steps[depth][1]
            try:
                if hooks and hooks[-1][0] == depth:
                    gen = hooks.pop()[1]
                    try:
                        gen.send(outcome)
                    except StopIteration:
                        pass
                    else:
                        gen.close()
                if after is not None:
                    after(ctx, outcome)
            except Skip as s:
                outcome.decide("skip", reason=s.reason)
            except Defer as d:
                outcome.decide("defer", delay=d.delay, reason=d.reason)
            except Exception as exc:
                outcome.error, outcome.action = exc, None
        task.hooks = None


def _late(task: Task) -> bool:
    leased_at = task.held.leased_at
    return leased_at > 0 and time.monotonic() - leased_at > LATE_START
