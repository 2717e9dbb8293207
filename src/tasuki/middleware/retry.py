"""What happens when a job fails: retry later, hand to the exhaustion handler, or dead-letter.

One attempt counter, kept by the backend, covers every cause of failure, so the rule is
the same whether the job raised, timed out or its worker died.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasuki import logs
from tasuki.middleware.base import Middleware, Outcome
from tasuki.policies import Retry

if TYPE_CHECKING:
    from tasuki.context import Context

DEFAULT_RETRY = Retry()


def decide_failure(ctx: Context, outcome: Outcome) -> None:
    """Set the action for a failed run; the worker calls this too if no middleware did."""
    error = outcome.error
    assert error is not None
    job = ctx.job
    policy = job.retry if job is not None else DEFAULT_RETRY
    message = ctx.message
    max_attempts = message.max_attempts or policy.max_attempts
    attempt = message.attempt
    if policy.retries(error) and attempt < max_attempts:
        outcome.decide("retry", delay=policy.delay(attempt), reason=_describe(error))
        return
    if attempt >= max_attempts:
        why = f"retries exhausted after {attempt} attempt{'s' if attempt != 1 else ''}"
    elif policy.give_up_on and isinstance(error, policy.give_up_on):
        why = f"gave up on {type(error).__name__}"
    else:
        why = f"{type(error).__name__} is not retried by this job's Retry.on"
    handler = job.on_exhausted if job is not None else None
    if handler is None:
        outcome.decide("dead", reason=why)
        return
    try:
        handler(message, error)
    except Exception as handler_error:
        outcome.error = handler_error
        outcome.decide("dead", reason=f"{why}; on_exhausted raised {type(handler_error).__name__}")
    else:
        if logs.enabled("exhausted handler ran"):
            logs.event(
                "exhausted handler ran",
                **logs.message_fields(message.queue, message.job, message.id, attempt),
                reason=why,
            )
        outcome.decide("ack", reason=f"{why}; on_exhausted handled it")


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class Retries(Middleware):
    """Turns a failed run into retry-with-backoff or a final outcome, per the job's `Retry`."""

    options = frozenset({"retry", "on_exhausted"})

    def after(self, ctx: Context, outcome: Outcome) -> None:
        if outcome.action is None and outcome.error is not None:
            decide_failure(ctx, outcome)
