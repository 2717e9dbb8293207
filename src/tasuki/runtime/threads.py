"""Where sync jobs run: a thread pool, how a job runs on a thread, how its timeout is
enforced there.

The pool takes plain callables and knows nothing about messages. A thread cannot be
killed, so a thread job's timeout sets `should_stop` and raises `JobTimeout` inside the
thread; one that does not stop (blocked in C code) is settled without it after a grace
second while the thread runs on. Process jobs (`processes.py`) are driven from this pool
too, so the middleware around them runs in the worker like any other; async jobs run on
one event loop (`eventloop.py`, imported only by workers that have async jobs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from queue import SimpleQueue
from typing import TYPE_CHECKING

from tasuki import logs
from tasuki.core.context import reset_current, set_current
from tasuki.core.outcome import Outcome
from tasuki.errors import Defer, JobTimeout, Skip
from tasuki.runtime.pace import SAMPLE, Pace

if TYPE_CHECKING:
    from tasuki.runtime.chain import ChainDriver
    from tasuki.runtime.deadlines import Deadlines
    from tasuki.runtime.finisher import Finisher
    from tasuki.runtime.processes import ProcessPool
    from tasuki.runtime.task import Task

# A stuck thread gets this long to react to its JobTimeout before its message is settled
# without it (it keeps its slot until it really returns).
TIMEOUT_GRACE = 1.0
_INJECTION = threading.Lock()

_STOP = None


class ThreadPool:
    """A fixed-size pool of daemon threads, started on demand.

    Unlike `concurrent.futures`, no future is made per call: the runtime settles each
    message itself, and at tens of thousands of jobs a second the future is overhead.
    Once every thread is started, the busy count (which only decides when to start
    another) is no longer kept: a hand-off is then a queue put alone, with no lock taken
    on the way in or out.
    """

    def __init__(self, size: int, name: str = "tasuki-job") -> None:
        self._size = size
        self._name = name
        self._queue: SimpleQueue[Callable[[], None] | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._full = False  # every thread started: set once, under the mutex, never unset
        self._mutex = threading.Lock()

    def submit(self, fn: Callable[[], None]) -> None:
        if not self._full:
            with self._mutex:
                self._busy += 1
                if self._busy > len(self._threads) and len(self._threads) < self._size:
                    t = threading.Thread(
                        target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
                    )
                    self._threads.append(t)
                    t.start()
                    self._full = len(self._threads) == self._size
        self._queue.put(fn)

    def _work(self) -> None:
        while True:
            fn = self._queue.get()
            if fn is _STOP:
                return
            try:
                fn()
            except Exception:
                # The runtime settles its own failures: this is a bug, and the thread must
                # outlive it (the delivery's lease lapses and it is delivered again).
                logs.logger.exception("internal error in a worker thread")
            finally:
                if not self._full:
                    with self._mutex:
                        self._busy -= 1

    def shutdown(self, wait: float = 0.0) -> None:
        for _ in self._threads:
            self._queue.put(_STOP)
        if wait > 0:
            for t in self._threads:
                t.join(wait)


def raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> bool:
    """Raise `exc_type` asynchronously in another thread (None clears a pending one).

    CPython checks for it between bytecodes, so pure-Python code stops promptly; a
    thread blocked inside a C call sees it when the call returns.
    """
    import ctypes  # needed only by jobs with a timeout

    exc = ctypes.py_object(exc_type) if exc_type is not None else None
    return bool(ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), exc))


class ThreadRunner:
    """Runs sync jobs (and drives process jobs) on the calling thread, start to settlement."""

    def __init__(
        self,
        chain: ChainDriver,
        finisher: Finisher,
        deadlines: Callable[[], Deadlines],
        processes: Callable[[], ProcessPool],
    ) -> None:
        self.chain = chain
        self.finisher = finisher
        self.keeper = finisher.keeper
        self._deadlines = deadlines
        self._processes = processes

    def run(self, task: Task) -> None:
        """Body of a thread-pool slot: the whole life of one sync (or process) job."""
        try:
            self._run(task)
        finally:
            self.keeper.discard(task.held)
            task.ctx.set_extender(None)

    def run_inline(self, tasks: list[Task], pace: Pace, budget: float) -> list[Task]:
        """Run a batch of fast jobs on this thread for up to `budget` seconds; returns the
        tasks not started (the budget ran out), for the pool, after the ones it ran."""
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
                    self._run(task)
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
        return tasks[len(done) :]

    def _run(self, task: Task) -> None:
        if task.claimed:
            return  # released at shutdown before it started: another worker may run it now
        ctx = task.ctx
        task.thread_id = threading.get_ident()
        token = set_current(ctx)
        try:
            outcome = self.chain.before(task)
            if outcome is None:
                if task.job.executor == "process":
                    from tasuki.runtime.processes import invoke  # multiprocessing: when used

                    outcome = invoke(self._processes(), task)
                elif ctx.deadline is not None:
                    deadlines = self._deadlines()
                    handle = deadlines.watch(ctx.deadline, lambda: self._deadline(task))
                    outcome = self._invoke(task)
                    deadlines.cancel(handle)
                else:
                    outcome = self._invoke(task)
            self.finisher.complete(task, outcome)
        finally:
            reset_current(token)

    def _invoke(self, task: Task) -> Outcome:
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
                    _leave_job(task)
        except Skip as s:
            outcome.decide("skip", reason=s.reason)
        except Defer as d:
            outcome.decide("defer", delay=d.delay, reason=d.reason)
        except JobTimeout as exc:
            outcome.error = task.timeout_error() if task.injected else exc
        except BaseException as exc:
            outcome.error = exc
        if task.in_job:  # the JobTimeout landed inside the `finally` above
            _leave_job(task)
        outcome.duration = time.perf_counter() - started
        return outcome

    def _deadline(self, task: Task) -> float | None:
        """The job's time is up: ask it to stop; a grace second later, settle without it."""
        ctx = task.ctx
        if task.claimed:
            return None
        if ctx.stop_reason != "timeout":
            if logs.enabled("timed out"):
                logs.event("timed out", **task.fields, timeout=task.job.timeout)
            ctx.request_stop("timeout")
            with _INJECTION:
                if task.in_job and not task.injected and task.thread_id:
                    task.injected = True
                    raise_in_thread(task.thread_id, JobTimeout)
            return time.monotonic() + TIMEOUT_GRACE
        # The thread ignored its JobTimeout (blocked in C code): settle without it.
        if task.claim():
            logs.logger.warning(
                "job %s (message %s) did not stop after its timeout; settling it while the "
                "thread runs on (use executor='process' for jobs that must be killable)",
                task.job.name,
                ctx.message.id,
            )
            self.keeper.discard(task.held)
            outcome = Outcome(error=task.timeout_error())
            self.chain.after(task, outcome)
            self.finisher.settle(task, outcome)
        return None


def _leave_job(task: Task) -> None:
    """Close the window in which a timeout may be injected, and drop one still pending."""
    with _INJECTION:
        task.in_job = False
        if task.injected and task.thread_id:
            raise_in_thread(task.thread_id, None)
