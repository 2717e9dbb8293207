"""Hand every failed run to an error tracker (Sentry and the like), with its message.

    app.middleware.insert_before("Logging", ReportErrors(
        lambda error, ctx, outcome: sentry_sdk.capture_exception(error)))

It sits outermost, so `outcome.action` is the final decision: "retry" for a failure
that will be tried again, "dead" when the message went to the dead letters. A reporter
that raises is logged and ignored: reporting never changes what happens to a message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tasuki import logs
from tasuki.middleware.base import Middleware, Outcome

if TYPE_CHECKING:
    from tasuki.core.context import Context

Reporter = Callable[[BaseException, "Context", Outcome], None]


class ReportErrors(Middleware):
    def __init__(self, report: Reporter, *, only_final: bool = False) -> None:
        """`only_final`: report only failures that dead-lettered the message, not retries."""
        self.report = report
        self.only_final = only_final

    def after(self, ctx: Context, outcome: Outcome) -> None:
        error = outcome.error
        if error is None or (self.only_final and outcome.action != "dead"):
            return
        try:
            self.report(error, ctx, outcome)
        except Exception:
            m = ctx.message
            logs.logger.exception("error reporter failed for message %s (queue %s)", m.id, m.queue)
