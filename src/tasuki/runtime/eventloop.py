"""Where async jobs run: one asyncio event loop in its own thread, each job a task on it,
its timeout enforced by cancelling it (`asyncio.timeout`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from tasuki.core.context import reset_current, set_current
from tasuki.core.outcome import Outcome
from tasuki.errors import Defer, JobTimeout, Skip
from tasuki.runtime.pulse import Pulse

if TYPE_CHECKING:
    from tasuki.runtime.chain import ChainDriver
    from tasuki.runtime.finisher import Finisher
    from tasuki.runtime.task import Task

BEAT_EVERY = 1.0


class EventLoopThread:
    """One asyncio loop in its own thread; async jobs are tasks on it."""

    def __init__(
        self,
        name: str = "tasuki-asyncio",
        guard: Callable[[str, Callable[[], None]], Callable[[], None]] | None = None,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._pending: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._pending_mutex = threading.Lock()
        self._scheduled = False
        self.tasks: set[asyncio.Task[None]] = set()
        self.pulse = Pulse("event loop")
        # What escapes `run_forever` (asyncio re-raises a SystemExit or KeyboardInterrupt
        # from any callback) leaves the async jobs without a loop: under the worker's
        # `fatal.guard` that stops the worker with status 1.
        target = self._run if guard is None else guard("asyncio", self._run)
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.call_soon(self._beat)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def _beat(self) -> None:
        """A loop blocked by a job that does not await beats no more (`runtime.health`)."""
        self.pulse.beat()
        self.loop.call_later(BEAT_EVERY, self._beat)

    def submit(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start a task; submissions made while the loop is busy are started together."""
        with self._pending_mutex:
            self._pending.append(make)
            if self._scheduled:
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._start_pending)

    def _start_pending(self) -> None:
        with self._pending_mutex:
            batch, self._pending = self._pending, []
            self._scheduled = False
        for make in batch:
            task = self.loop.create_task(make())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def call(self, fn: Callable[[], None]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def stop(self, wait: float = 5.0) -> None:
        if self.loop.is_closed():
            return

        def _halt() -> None:
            for task in list(self.tasks):
                task.cancel()
            self.loop.call_later(0.05, self.loop.stop)

        self.loop.call_soon_threadsafe(_halt)
        self._thread.join(wait)


class AsyncRunner:
    """Runs one async job on the loop, start to settlement."""

    def __init__(self, chain: ChainDriver, finisher: Finisher) -> None:
        self.chain = chain
        self.finisher = finisher

    async def run(self, task: Task) -> None:
        ctx = task.ctx
        task.async_task = asyncio.current_task()
        token = set_current(ctx)
        try:
            outcome = self.chain.before(task)
            if outcome is None:
                outcome = await self._invoke(task)
            self.finisher.complete(task, outcome)
        except asyncio.CancelledError:
            pass  # cancelled at shutdown, after its message was released
        finally:
            reset_current(token)
            self.finisher.keeper.discard(task.held)
            ctx.set_extender(None)

    @staticmethod
    async def _invoke(task: Task) -> Outcome:
        job, ctx = task.job, task.ctx
        m = ctx.message
        outcome = Outcome()
        started = time.perf_counter()
        timeout = None if ctx.deadline is None else max(0.0, ctx.deadline - time.monotonic())
        try:
            async with asyncio.timeout(timeout) as scope:
                if job.consumer:
                    outcome.result = await job.fn(m)
                else:
                    outcome.result = await job.fn(*m.args, **m.kwargs)
        except Skip as s:
            outcome.decide("skip", reason=s.reason)
        except Defer as d:
            outcome.decide("defer", delay=d.delay, reason=d.reason)
        except TimeoutError as exc:
            if scope.expired():
                ctx.request_stop("timeout")
                outcome.error = task.timeout_error()
            else:
                outcome.error = exc
        except asyncio.CancelledError:
            if task.claimed:
                raise
            outcome.error = JobTimeout("the job was cancelled")
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # a job's, as on a thread
            outcome.error = exc
        outcome.duration = time.perf_counter() - started
        return outcome
