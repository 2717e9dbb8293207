"""What a failed run's message becomes: retry later, the exhaustion handler, or dead letter.

One attempt counter, kept by the backend, covers every cause of failure, so the rule is
the same whether the job raised, timed out or its worker died. The job's declared policy
governs, whoever enqueued the message: a producer without the app (the CLI with `--url`,
another service, an older release) may have stamped another limit on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasuki import logs
from tasuki.core.policies import Retry
from tasuki.core.reasons import exhausted

if TYPE_CHECKING:
    from tasuki.core.context import Context
    from tasuki.core.outcome import Outcome

DEFAULT_RETRY = Retry()


def max_attempts_of(ctx: Context) -> int:
    """The attempt limit of this delivery: the job's own, else what the message carries."""
    job = ctx.job
    if job is not None:
        return job.retry.max_attempts
    return ctx.message.max_attempts or DEFAULT_RETRY.max_attempts


def decide_failure(ctx: Context, outcome: Outcome) -> None:
    """Set the action of a failed run that no middleware decided on."""
    error = outcome.error
    assert error is not None
    job = ctx.job
    policy = job.retry if job is not None else DEFAULT_RETRY
    message = ctx.message
    max_attempts = max_attempts_of(ctx)
    attempt = message.attempt
    out_of_attempts = exhausted(attempt, max_attempts)
    if policy.retries(error) and not out_of_attempts:
        outcome.decide("retry", delay=policy.delay(attempt), reason=_describe(error))
        return
    if out_of_attempts:
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
