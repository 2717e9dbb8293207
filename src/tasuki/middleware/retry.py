"""Retries as middleware: a failed run becomes retry-with-backoff or a final outcome, by
the job's `Retry` (the rule itself is `core/failure.py`, which the worker also applies to
an error no middleware decided on)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasuki.core.failure import decide_failure
from tasuki.middleware.base import Middleware, Outcome

if TYPE_CHECKING:
    from tasuki.core.context import Context


class Retries(Middleware):
    """Turns a failed run into retry-with-backoff or a final outcome, per the job's `Retry`."""

    options = frozenset({"retry", "on_exhausted"})

    def after(self, ctx: Context, outcome: Outcome) -> None:
        if outcome.action is None and outcome.error is not None:
            decide_failure(ctx, outcome)
