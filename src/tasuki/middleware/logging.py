"""The started / finished / skipped / retry / dead-lettered lines, one per event.

It sits outermost so that it reports the final decision of the inner middleware (a
retry decided by `Retries`, a skip decided by `DedupGuard`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.middleware.base import Middleware, Outcome

if TYPE_CHECKING:
    from tasuki.core.context import Context

# Outcomes whose events log at INFO (see logs.EVENT_LEVELS).
_INFO_ACTIONS = frozenset({"ack", "skip", "defer"})
_EVENTS = {
    "ack": "finished",
    "skip": "skipped",
    "defer": "deferred",
    "retry": "retry scheduled",
    "dead": "dead-lettered",
}


def _fields(ctx: Context) -> dict[str, Any]:
    m = ctx.message
    return logs.message_fields(
        m.queue, m.job or (ctx.job.name if ctx.job else None), m.id, m.attempt
    )


class Logging(Middleware):
    """`started` before the run, the final decision after it (`duration`: the job's own)."""

    def execute(self, ctx: Context) -> None:
        if logs.logger.isEnabledFor(logging.INFO):
            logs.event("started", **_fields(ctx))

    def after(self, ctx: Context, outcome: Outcome) -> None:
        action = outcome.action or "ack"
        if action == "cancel":
            return  # the lease keeper logged "cancelled" when it learnt it
        if action in _INFO_ACTIONS and not logs.logger.isEnabledFor(logging.INFO):
            return  # the common case at WARNING: a success nobody logs
        name = _EVENTS.get(action, "finished")
        if not logs.enabled(name):
            return
        extra: dict[str, Any] = {"duration": outcome.duration}
        if outcome.action in ("retry", "defer"):
            extra["delay"] = outcome.delay
        if outcome.action in ("skip", "defer", "retry", "dead") or outcome.reason:
            extra["reason"] = outcome.reason
        if outcome.error is not None and outcome.action in ("retry", "dead"):
            extra["error"] = f"{type(outcome.error).__name__}: {outcome.error}"
        # The traceback goes with the last word on a failure, not with each retry.
        exc = outcome.error if outcome.action == "dead" else None
        logs.event(name, exc, **_fields(ctx), **extra)
