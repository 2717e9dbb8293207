"""One delivery on its way through the worker, and the gate that settles it once.

Every delivery ends in exactly one settlement (ack, release or dead letter), or in none
when its lease was lost, in which case the message belongs to another delivery now.
`Task.claim()` is the single gate: whoever claims a task (the job finishing, the timeout
giving up on a stuck thread, the shutdown releasing what is left) settles it, once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.core.context import Context
from tasuki.core.outcome import Outcome
from tasuki.errors import JobTimeout
from tasuki.middleware.base import ExecuteHook

if TYPE_CHECKING:
    import asyncio

    from tasuki.core.flows import StepPlan
    from tasuki.core.job import Job
    from tasuki.core.records import Receipt
    from tasuki.runtime.heartbeat import Held

# One middleware's part in a run: its `execute` and `after`, each None if not overridden.
Step = tuple[
    Callable[[Context], ExecuteHook | None] | None,
    Callable[[Context, Outcome], None] | None,
]

_CLAIMS = threading.Lock()


class Task:
    __slots__ = (
        "async_task",
        "claimed",
        "ctx",
        "depth",
        "flow",
        "held",
        "hooks",
        "in_job",
        "injected",
        "job",
        "plan",
        "receipt",
        "thread_id",
    )

    def __init__(self, ctx: Context, job: Job[..., Any], held: Held, receipt: Receipt) -> None:
        self.ctx = ctx
        self.job = job
        self.held = held
        self.receipt = receipt
        self.claimed = False
        # The message's part of its workflow's plan, if it is a flow step (`flows.py`).
        self.flow: StepPlan | None = None
        # The middleware steps of this run, how many of them the way in got past, and the
        # generators among them waiting for the outcome (with their step's index).
        self.plan: tuple[Step, ...] = ()
        self.depth = 0
        self.hooks: list[tuple[int, ExecuteHook]] | None = None
        # Where a thread job runs, for its timeout (see `threads.py`).
        self.thread_id = 0
        self.in_job = False
        self.injected = False
        self.async_task: asyncio.Task[None] | None = None

    @property
    def fields(self) -> dict[str, Any]:
        """The fields every log line about this delivery carries (made only when logged)."""
        m = self.ctx.message
        return logs.message_fields(m.queue, m.job or self.job.name, m.id, m.attempt)

    @property
    def granted(self) -> float:
        """The lease length the backend granted (the job may want another)."""
        lease = self.ctx.message.lease
        return lease.visibility_timeout if lease is not None else self.held.visibility_timeout

    def timeout_error(self, detail: str = "") -> JobTimeout:
        return JobTimeout(
            f"job {self.job.name!r} exceeded its timeout of {self.job.timeout}s "
            f"(attempt {self.ctx.attempt}){detail}"
        )

    def claim(self) -> bool:
        """True exactly once: the caller owns this delivery's settlement."""
        with _CLAIMS:
            if self.claimed:
                return False
            self.claimed = True
            return True
