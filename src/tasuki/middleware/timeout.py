"""Per-attempt time limits. The middleware sets the deadline; each executor enforces it
its own way: asyncio cancels the task, a thread gets `JobTimeout` raised inside it (and
`should_stop` set), the process pool kills the child process."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tasuki.middleware.base import Middleware

if TYPE_CHECKING:
    from tasuki.core.context import Context
    from tasuki.core.job import Job


class Timeouts(Middleware):
    options = frozenset({"timeout"})

    def applies_to(self, job: Job[..., Any]) -> bool:
        return job.timeout is not None

    def execute(self, ctx: Context) -> None:
        job = ctx.job
        if job is not None and job.timeout is not None:
            ctx.deadline = time.monotonic() + job.timeout
