"""Run an app's jobs in the test that enqueued them, until nothing is left, and hear of
every failure.

What Celery's eager mode, Dramatiq's `StubBroker` with `worker.join()` and RQ's
`is_async=False` give their users, done with a real worker on real leases: the jobs run
as they will in production (middleware, retries, deferrals, timeouts), and a job that
failed cannot pass unnoticed. `drain(app)` re-raises the first error a job raised, with
its traceback, and stops there: the message waits for its retry as it would in
production. A message that went to the dead letters without a run (an unknown job, a body
that cannot be decoded) raises `DeadLettered`; queues that do not become idle in time
raise `DrainTimeout`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tasuki.core.context import Context
from tasuki.core.message import DeadLetter, Message
from tasuki.core.outcome import Action, Outcome
from tasuki.errors import DeadLettered, DrainTimeout, InvalidArgument
from tasuki.middleware.base import Middleware

if TYPE_CHECKING:
    from tasuki.app import App

DEFAULT_TIMEOUT = 10.0
_PAGE = 500
_WAIT = 0.05


@dataclass(frozen=True)
class Run:
    """One run of a job during a drain, and what was decided for its message.

    `action` is the final decision of the middleware chain: "ack", "skip", "defer",
    "retry" or "dead" (None when no middleware decided on an error: the worker's default
    rule retries it). `result` is what the job returned.
    """

    message: Message
    action: Action | None
    error: BaseException | None
    result: Any


@dataclass(frozen=True)
class Drained:
    """What a drain saw: every run, in the order they ended, and the new dead letters."""

    runs: tuple[Run, ...]
    dead: tuple[DeadLetter, ...]

    @property
    def failures(self) -> tuple[Run, ...]:
        """The runs that raised."""
        return tuple(run for run in self.runs if run.error is not None)

    def results(self, job: str | None = None) -> list[Any]:
        """What the runs that succeeded returned: all of them, or those of `job`."""
        return [
            run.result
            for run in self.runs
            if run.action == "ack" and run.error is None and (job is None or run.message.job == job)
        ]


class _Recorder(Middleware):
    """Outermost in the chain, so it sees each run's final outcome."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.on_failure: Callable[[], None] = lambda: None
        self._mutex = threading.Lock()

    def after(self, ctx: Context, outcome: Outcome) -> None:
        run = Run(ctx.message, outcome.action, outcome.error, outcome.result)
        with self._mutex:
            self.runs.append(run)
        if run.error is not None:
            self.on_failure()


def drain(
    app: App,
    queues: Sequence[str] | str | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    raise_errors: bool = True,
    concurrency: int = 1,
) -> Drained:
    """Run the app's jobs until its queues hold nothing ready, delayed or in flight.

    `queues` are those of the app's jobs by default. With `raise_errors` (the default)
    the first error a job raises stops the drain and is raised again, its traceback
    intact; without it, the drain goes on (retries included, after their backoff) and
    the failures are in what it returns. A message dead-lettered without a run raises
    `tasuki.errors.DeadLettered` (with `raise_errors`). Queues still busy after
    `timeout` seconds raise `tasuki.errors.DrainTimeout`, naming what is left. Periodic
    jobs are not scheduled: enqueue what a test needs.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout!r}")
    recorder = _Recorder()
    # A short blocking wait: the drain ends as soon as the queues are idle.
    worker = app.worker(queues, concurrency=concurrency, scheduler=False, wait=_WAIT)
    seen = {(d.queue, d.id, d.died_at) for q in worker.queues for d in _dead_letters(app, q)}
    deadline = time.monotonic() + timeout
    if raise_errors:
        recorder.on_failure = lambda: worker.request_stop(max(0.0, deadline - time.monotonic()))
    chain = app.middleware
    outermost = next(iter(chain), None)
    if outermost is None:
        chain.append(recorder)
    else:
        chain.insert_before(outermost, recorder)
    try:
        worker.run(until_idle=True, timeout=timeout)
    finally:
        chain.remove(recorder)
    new_dead = tuple(
        dead
        for q in worker.queues
        for dead in _dead_letters(app, q)
        if (dead.queue, dead.id, dead.died_at) not in seen
    )
    drained = Drained(tuple(recorder.runs), new_dead)
    if raise_errors:
        error = next((run.error for run in drained.runs if run.error is not None), None)
        if error is not None:
            raise error
        ran = {run.message.id for run in drained.runs if run.action == "dead"}
        unexplained = [dead for dead in new_dead if dead.id not in ran]
        if unexplained:
            raise DeadLettered(_describe_dead(unexplained))
    left = _left(app, worker.queues)
    if left:
        raise DrainTimeout(f"drain gave up after {timeout:g} s: {left}")
    return drained


def _dead_letters(app: App, queue: str) -> list[DeadLetter]:
    if not app.backend.capabilities.dead_letter_browsing or not app.backend.stats(queue).dead:
        return []
    found: list[DeadLetter] = []
    while page := app.backend.dead_letters(queue, _PAGE, len(found)):
        found.extend(page)
        if len(page) < _PAGE:
            break
    return found


def _describe_dead(dead: list[DeadLetter]) -> str:
    first = dead[0]
    what = f"job {first.job!r}" if first.job else "a raw message"
    error = f" ({first.error})" if first.error is not None else ""
    more = f"; and {len(dead) - 1} more" if len(dead) > 1 else ""
    return (
        f"message {first.id!r} ({what}) on queue {first.queue!r} went to the dead letters "
        f"without a run: {first.reason}{error}{more}"
    )


def _left(app: App, queues: Sequence[str]) -> str:
    """What the queues still hold, or "" when they are idle."""
    busy = []
    for q in queues:
        s = app.backend.stats(q)
        if s.ready or s.in_flight or s.delayed:
            busy.append(
                f"queue {q!r} holds {s.ready} ready, {s.in_flight} in flight, {s.delayed} delayed"
            )
    if not busy:
        return ""
    return "; ".join(busy) + (
        " (a delayed message waits for its time: an enqueue's delay or a retry's backoff)"
    )
