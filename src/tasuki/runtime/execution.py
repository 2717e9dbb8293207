"""From a leased delivery to a settled message: decode, run through middleware, settle.

Every delivery ends in exactly one settlement (ack, release or dead-letter), or in none
when its lease was lost, in which case the message belongs to another delivery now.
`Task.claim()` is the single gate: whoever claims a task (the job finishing, the timeout
giving up on a stuck thread, the shutdown releasing what is left) settles it, once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.context import Context, reset_current, set_current
from tasuki.errors import (
    Defer,
    InvalidArgument,
    JobTimeout,
    SerializationError,
    SignatureError,
    Skip,
    UnknownJob,
)
from tasuki.message import JOB_HEADER, ErrorInfo, Lease, delivered
from tasuki.middleware.base import ExecuteHook, Outcome
from tasuki.middleware.retry import decide_failure
from tasuki.runtime.executors import raise_in_thread
from tasuki.runtime.heartbeat import Held, LeaseKeeper
from tasuki.runtime.pace import SAMPLE, Pace
from tasuki.runtime.settler import Settlement, Settler

if TYPE_CHECKING:
    import asyncio

    from tasuki.app import App
    from tasuki.backends.base import Delivery, Receipt
    from tasuki.job import Job
    from tasuki.runtime.processes import ProcessPool

# A stuck thread gets this long to react to its JobTimeout before its message is settled
# without it (it keeps its slot until it really returns).
TIMEOUT_GRACE = 1.0


# One middleware's part in a run: its `execute` and `after`, each None if not overridden.
Step = tuple[
    Callable[[Context], ExecuteHook | None] | None,
    Callable[[Context, Outcome], None] | None,
]

_CLAIMS = threading.Lock()
_INJECTION = threading.Lock()


class Task:
    """One delivery on its way through the worker."""

    __slots__ = (
        "async_task",
        "claimed",
        "ctx",
        "depth",
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
        # The middleware steps of this run, how many of them the way in got past, and the
        # generators among them waiting for the outcome (with their step's index).
        self.plan: tuple[Step, ...] = ()
        self.depth = 0
        self.hooks: list[tuple[int, ExecuteHook]] | None = None
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

    def claim(self) -> bool:
        """True exactly once: the caller owns this delivery's settlement."""
        with _CLAIMS:
            if self.claimed:
                return False
            self.claimed = True
            return True

    # -- timeouts of thread jobs ----------------------------------------------------------
    def inject_timeout(self) -> None:
        with _INJECTION:
            if self.in_job and not self.injected and self.thread_id:
                self.injected = True
                raise_in_thread(self.thread_id, JobTimeout)

    def leave_job(self) -> None:
        """Close the window in which a timeout may be injected, and drop one still pending."""
        with _INJECTION:
            self.in_job = False
            if self.injected and self.thread_id:
                raise_in_thread(self.thread_id, None)


class Runner:
    def __init__(
        self,
        app: App,
        settler: Settler,
        keeper: LeaseKeeper,
        on_done: Callable[[Task | None], None],
        processes: Callable[[], ProcessPool],
        on_done_many: Callable[[list[Task]], None],
    ) -> None:
        self.app = app
        self.settler = settler
        self.keeper = keeper
        self.on_done = on_done
        self.on_done_many = on_done_many
        self._processes = processes
        # job name -> (chain version, its middleware steps)
        self._plans: dict[str, tuple[int, tuple[Step, ...]]] = {}

    # -- receiving --------------------------------------------------------------------------
    def receive_many(self, deliveries: list[Delivery]) -> list[Task]:
        log_received = logs.enabled("received")
        tasks = []
        for d in deliveries:
            if log_received:
                name = d.headers.get(JOB_HEADER)
                logs.event("received", **logs.message_fields(d.queue, name, d.id, d.attempt))
            task = self._receive(d)
            if task is not None:
                tasks.append(task)
        self._track(tasks)
        return tasks

    def _track(self, tasks: list[Task]) -> None:
        """Hand the batch's leases to the keeper (one lock for the batch)."""
        if not tasks:
            return
        self.keeper.add_many([t.held for t in tasks])
        if any(t.held.visibility_timeout != t.granted for t in tasks):
            self.keeper.wake()  # a lease to bring to the job's own length at once

    def _receive(self, d: Delivery) -> Task | None:
        """Decode a delivery; a poison message is dead-lettered here and None returned."""
        headers = d.headers
        name = headers.get(JOB_HEADER)
        codec = self.app.codec
        if codec.signs:
            try:
                codec.verify(d.queue, headers, d.body)
            except SignatureError as exc:
                self._poison(d, "refused: bad signature", exc)
                return None
        if name is None:
            job = self.app.consumers.get(d.queue)
            if job is None:
                exc2 = UnknownJob(f"no consumer for raw messages on queue {d.queue!r}")
                self._poison(d, str(exc2), exc2)
                return None
            message = d.to_message()
        else:
            found = self.app.jobs.get(name)
            if found is None or found.consumer:
                exc3 = UnknownJob(f"unknown job {name!r}")
                self._poison(d, str(exc3), exc3)
                return None
            job = found
            try:
                args, kwargs = self.app.codec.decode_payload(headers, d.body)
            except SerializationError as exc:
                self._poison(d, "undecodable message", exc)
                return None
            message = delivered(
                d.id,
                d.queue,
                d.body,
                headers,
                d.attempt,
                d.enqueued_at,
                name,
                args,
                kwargs,
                Lease(d.token, d.fencing_token, d.visibility_timeout),
                d.max_attempts,
            )
        # The worker's own job definition decides the lease length: a producer running
        # older code may have enqueued the message with another one. Such a lease is
        # marked as extended long ago, so the keeper extends it to the job's length at once.
        vt = job.visibility_timeout
        now = time.monotonic()
        ctx = Context(message, job)
        held = Held(ctx, vt, now - vt if vt != d.visibility_timeout else now, self.keeper)
        ctx.set_extender(held.extend)
        return Task(ctx, job, held, d.receipt)

    def _poison(self, d: Delivery, reason: str, error: BaseException) -> None:
        fields = logs.message_fields(d.queue, d.headers.get(JOB_HEADER), d.id, d.attempt)
        logs.event("dead-lettered", **fields, reason=reason)
        info = ErrorInfo(type(error).__name__, str(error), "")
        self.settler.put(Settlement("bury", d.receipt, fields, reason=reason, error=info))
        self.on_done(None)

    # -- middleware ---------------------------------------------------------------------------
    def plan_for(self, job: Job[..., Any]) -> tuple[Step, ...]:
        """The middleware steps of `job`'s runs, outermost first, made once per chain version."""
        chain = self.app.middleware
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

    def _before(self, task: Task) -> Outcome | None:
        """Run the steps on the way in; an Outcome if one of them decided the run's fate."""
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
    def _after(task: Task, outcome: Outcome) -> None:
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

    # -- running ------------------------------------------------------------------------------
    def run_sync(self, task: Task) -> None:
        """Body of a thread-pool slot: the whole life of one sync (or process) job."""
        try:
            self._run_sync(task)
        finally:
            self._finish(task)
            self.on_done(task)

    def run_inline(self, tasks: list[Task], pace: Pace, budget: float) -> list[Task]:
        """Run a batch of fast jobs on this thread, for up to `budget` seconds.

        Returns the tasks it did not start (the budget ran out), for the pool. The lease
        keeper and the slots hear about the batch once, when it is done.
        """
        clock, cpu_clock = time.perf_counter, time.thread_time
        give_up_at = clock() + budget
        done: list[Task] = []
        try:
            for n, task in enumerate(tasks):
                started = clock()
                if started > give_up_at:
                    break
                sampled = n % SAMPLE == 0
                cpu = cpu_clock() if sampled else 0.0
                try:
                    self._run_sync(task)
                except Exception:
                    logs.logger.exception(
                        "internal error running message %s; its lease will lapse and it will "
                        "be delivered again",
                        task.ctx.message.id,
                    )
                finally:
                    done.append(task)
                seconds = clock() - started
                pace.record(task.job, seconds)
                if sampled:
                    pace.record_busy(task.job, seconds, cpu_clock() - cpu)
        finally:
            self.keeper.discard_many([t.held for t in done])
            for task in done:
                task.ctx.set_extender(None)
            self.on_done_many(done)
        return tasks[len(done) :]

    def _finish(self, task: Task) -> None:
        self.keeper.discard(task.held)
        task.ctx.set_extender(None)

    def _run_sync(self, task: Task) -> None:
        if task.claimed:
            return  # released at shutdown before it started: another worker may run it now
        ctx = task.ctx
        task.thread_id = threading.get_ident()
        token = set_current(ctx)
        try:
            outcome = self._before(task)
            if outcome is None:
                if ctx.deadline is not None:
                    if task.job.executor != "process":
                        task.held.on_deadline = lambda: self._thread_deadline(task)
                    self.keeper.wake()
                if task.job.executor == "process":
                    outcome = self._invoke_process(task)
                else:
                    outcome = self._invoke_thread(task)
            self.complete(task, outcome)
        finally:
            reset_current(token)

    def _invoke_thread(self, task: Task) -> Outcome:
        job, m = task.job, task.ctx.message
        outcome = Outcome()
        started = time.perf_counter()
        # Without a deadline nothing can inject a JobTimeout: skip the guard's locking.
        guarded = task.ctx.deadline is not None
        try:
            if not guarded:
                outcome.result = job.fn(m) if job.consumer else job.fn(*m.args, **m.kwargs)
            else:
                try:
                    task.in_job = True
                    outcome.result = job.fn(m) if job.consumer else job.fn(*m.args, **m.kwargs)
                finally:
                    task.leave_job()
        except Skip as s:
            outcome.decide("skip", reason=s.reason)
        except Defer as d:
            outcome.decide("defer", delay=d.delay, reason=d.reason)
        except JobTimeout as exc:
            outcome.error = self._timeout_error(task) if task.injected else exc
        except BaseException as exc:
            outcome.error = exc
        if task.in_job:  # the JobTimeout landed inside the `finally` above
            task.leave_job()
        outcome.duration = time.perf_counter() - started
        return outcome

    def _invoke_process(self, task: Task) -> Outcome:
        job, ctx = task.job, task.ctx
        outcome = Outcome()
        started = time.perf_counter()
        try:
            self._processes().run(
                job.fn.__module__, job.fn.__qualname__, ctx.message, job.consumer, ctx.deadline
            )
        except Skip as s:
            outcome.decide("skip", reason=s.reason)
        except Defer as d:
            outcome.decide("defer", delay=d.delay, reason=d.reason)
        except JobTimeout:
            ctx.request_stop("timeout")
            outcome.error = self._timeout_error(task, "; its process was killed")
        except Exception as exc:
            outcome.error = exc
        outcome.duration = time.perf_counter() - started
        return outcome

    def _timeout_error(self, task: Task, detail: str = "") -> JobTimeout:
        return JobTimeout(
            f"job {task.job.name!r} exceeded its timeout of {task.job.timeout}s "
            f"(attempt {task.ctx.attempt}){detail}"
        )

    def _thread_deadline(self, task: Task) -> None:
        """Called by the lease keeper when a thread job's deadline passes."""
        ctx = task.ctx
        if ctx.stop_reason != "timeout":
            if logs.enabled("timed out"):
                logs.event("timed out", **task.fields, timeout=task.job.timeout)
            ctx.request_stop("timeout")
            task.inject_timeout()
            ctx.deadline = time.monotonic() + TIMEOUT_GRACE
            task.held.deadline_fired = False
            return
        # The thread ignored its JobTimeout (blocked in C code): settle without it.
        if task.claim():
            logs.logger.warning(
                "job %s (message %s) did not stop after its timeout; settling it while the "
                "thread runs on (use executor='process' for jobs that must be killable)",
                task.job.name,
                ctx.message.id,
            )
            self.keeper.discard(task.held)
            outcome = Outcome(error=self._timeout_error(task))
            self._after(task, outcome)
            self._settle(task, outcome)

    async def run_async(self, task: Task) -> None:
        import asyncio  # here, not at the top: workers without async jobs never load it

        ctx = task.ctx
        task.async_task = asyncio.current_task()
        token = set_current(ctx)
        try:
            outcome = self._before(task)
            if outcome is None:
                outcome = await self._invoke_async(task)
            self.complete(task, outcome)
        except asyncio.CancelledError:
            pass  # cancelled at shutdown, after its message was released
        finally:
            reset_current(token)
            self._finish(task)
            self.on_done(task)

    async def _invoke_async(self, task: Task) -> Outcome:
        import asyncio

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
                outcome.error = self._timeout_error(task)
            else:
                outcome.error = exc
        except asyncio.CancelledError:
            if task.claimed:
                raise
            outcome.error = JobTimeout("the job was cancelled")
        except Exception as exc:
            outcome.error = exc
        outcome.duration = time.perf_counter() - started
        return outcome

    # -- settling -------------------------------------------------------------------------------
    def complete(self, task: Task, outcome: Outcome) -> None:
        if not task.claim():
            return  # settled already: released at shutdown, or given up after a timeout
        if isinstance(outcome.error, TypeError) and outcome.action is None:
            self._check_fit(task, outcome)
        self._after(task, outcome)
        self._settle(task, outcome)

    @staticmethod
    def _check_fit(task: Task, outcome: Outcome) -> None:
        """A TypeError may mean the message's arguments no longer fit the job (a deploy
        changed its signature): no retry can fix that, so it goes to the dead letters.
        Checked only after a failure, to keep signature binding off the hot path."""
        job, m = task.job, task.ctx.message
        if job.consumer:
            return
        try:
            job.check_arguments(m.args, m.kwargs)
        except InvalidArgument as misfit:
            misfit.__cause__ = outcome.error
            outcome.error = misfit
            outcome.decide("dead", reason="arguments do not fit the job")

    def _settle(self, task: Task, outcome: Outcome) -> None:
        ctx = task.ctx
        if ctx.lease_lost:
            return  # another delivery owns the message: never settle with a stale token
        if outcome.action is None:
            if outcome.error is None:
                outcome.action = "ack"
            else:
                decide_failure(ctx, outcome)
        action = outcome.action
        receipt = task.receipt
        if action in ("ack", "skip"):
            self.settler.put(Settlement("ack", receipt, task))
        elif action == "defer":
            self.settler.put(
                Settlement("release", receipt, task, delay=outcome.delay, penalty=False)
            )
        elif action == "retry":
            self.settler.put(
                Settlement("release", receipt, task, delay=outcome.delay, penalty=True)
            )
        else:
            error = ErrorInfo.from_exception(outcome.error) if outcome.error else None
            self.settler.put(Settlement("bury", receipt, task, reason=outcome.reason, error=error))

    def release_on_shutdown(self, task: Task) -> bool:
        """Hand a still-running job's message back without penalty; True if this did it."""
        if not task.claim():
            return False
        self.keeper.discard(task.held)
        if task.ctx.lease_lost:
            return False
        logs.event("released on shutdown", **task.fields)
        self.settler.put(Settlement("release", task.receipt, task, penalty=False))
        return True
