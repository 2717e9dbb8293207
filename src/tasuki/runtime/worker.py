"""The worker: wires fetchers, executors, the lease keeper and the settler together.

Each concern lives in its own module; this one owns the slots and the set of running
tasks, dispatches each leased batch to where its jobs run, and decides the order of start
and, more importantly, of stop: stop fetching, ask running jobs to stop, wait out the
grace, release what is left without penalty, flush every settlement, and only then return.

It is handed what it needs (the job registry, backend, lock store, codec and middleware
chain), not the app.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.backends.base import DEFAULT_VISIBILITY_TIMEOUT, Backend, Delivery, LockStore
from tasuki.core.codec import Codec
from tasuki.core.console import Running, Tallies
from tasuki.core.job import check_queue
from tasuki.core.outgoing import Sealer
from tasuki.core.registry import Registry
from tasuki.core.steps import DEFAULT_MAX_STEPS, check_max_steps, durable_for
from tasuki.errors import InvalidArgument, TasukiError
from tasuki.middleware.base import MiddlewareChain
from tasuki.runtime.announcer import ANNOUNCE_EVERY, Announcer
from tasuki.runtime.chain import ChainDriver
from tasuki.runtime.cores import CoreWatch
from tasuki.runtime.deadlines import Deadlines
from tasuki.runtime.fatal import Fatal, LoopFailed, exit_later
from tasuki.runtime.fetcher import Fetcher, Slots
from tasuki.runtime.finisher import Finisher
from tasuki.runtime.flows import FlowSteps
from tasuki.runtime.heartbeat import LeaseKeeper
from tasuki.runtime.lock_renewal import LockRenewal
from tasuki.runtime.maintenance import Maintenance
from tasuki.runtime.pace import BATCH_BUDGET, Pace
from tasuki.runtime.pauses import PauseWatch
from tasuki.runtime.pulse import Pulse
from tasuki.runtime.receiver import Receiver
from tasuki.runtime.returning import Returning
from tasuki.runtime.scheduler import Scheduler
from tasuki.runtime.settler import Settler
from tasuki.runtime.signals import graceful_signals
from tasuki.runtime.task import Task
from tasuki.runtime.threads import ThreadPool, ThreadRunner

if TYPE_CHECKING:
    from tasuki.runtime.eventloop import AsyncRunner, EventLoopThread
    from tasuki.runtime.processes import ProcessPool

IDLE_CHECK = 0.05


class Worker:
    """Runs the app's jobs from `queues` with up to `concurrency` messages at once.

    `run(until_idle=True)` returns once the queues hold nothing ready, delayed or in
    flight (for tests and scripts); otherwise it runs until `stop()` or a signal.
    """

    def __init__(
        self,
        registry: Registry,
        backend: Backend,
        *,
        locks: LockStore,
        codec: Codec,
        chain: MiddlewareChain,
        default_queue: str = "default",
        queues: Sequence[str] | str | None = None,
        concurrency: int = 8,
        grace: float = 25.0,
        batch_size: int | None = None,
        wait: float = 0.25,
        processes: int | None = None,
        scheduler: bool = True,
        handle_signals: bool = False,
        inline: bool = True,
        sealer: Sealer | None = None,
        announce_every: float = ANNOUNCE_EVERY,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidArgument(f"concurrency must be an int >= 1, got {concurrency!r}")
        if grace < 0:
            raise InvalidArgument(f"grace must be >= 0 seconds, got {grace!r}")
        self.registry = registry
        self.backend = backend
        self.locks = locks
        self.codec = codec
        self.chain = chain
        # How a flow step's successors are sealed: the app's producer's way.
        caps = backend.capabilities
        self.sealer = sealer or Sealer(codec, caps.max_message_size, caps.max_delay)
        self.durable = durable_for(backend, caps, backend.scheme, check_max_steps(max_steps))
        if isinstance(queues, str):
            queues = [q.strip() for q in queues.split(",") if q.strip()]
        if not queues:
            queues = sorted(registry.queues() or {default_queue})
        self.queues = [check_queue(q) for q in queues]
        self.concurrency = concurrency
        self.grace = float(grace)
        # Half the slots per lease: a busy fetcher asks for the next batch while it runs
        # the current one, and both must fit in `concurrency`.
        self.batch_size = batch_size or max(1, min(concurrency // 2, 256))
        self.wait = wait
        self.processes = processes or os.cpu_count() or 1
        self.use_scheduler = scheduler
        self.announce_every = announce_every
        self.handle_signals = handle_signals
        self.pace = Pace(enabled=inline)
        self.processed = 0
        self.released_on_shutdown = 0
        self._stop_requested = threading.Event()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._requested_grace: float | None = None
        self._active: set[Task] = set()
        self._mutex = threading.Lock()
        self._started = False
        # The loops exist (set at the end of `start`): until then the health checks have
        # nothing to watch. A probe served before `start` returns must not see half a worker.
        self._loops: list[Any] = []
        self._running_loop = False
        self._run_thread: threading.Thread | None = None
        self._loop: EventLoopThread | None = None
        self._async: AsyncRunner | None = None
        self._pool: ProcessPool | None = None
        self._deadlines: Deadlines | None = None
        self._renewal: LockRenewal | None = None
        # Set by `run(until_idle=True)`: the releases this worker expects back.
        self._returning: Returning | None = None
        # The first loop that could not go on (`fatal.py`): the worker then stops.
        self._ready = False  # `start` done: every loop exists
        self._failure_stop = False
        self.fatal = Fatal()
        self.fatal.on_failure(self._loop_failed)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            raise TasukiError("a worker can only be started once")
        self._started = True
        backend = self.backend
        returning = self._returning
        fatal = self.fatal
        self.settler = Settler(
            backend,
            on_released=None
            if returning is None
            else lambda done: returning.released(
                (s.receipt.queue, s.receipt.id, s.delay) for s in done
            ),
            fatal=fatal,
        )
        self.keeper = LeaseKeeper(backend, self.chain, fatal)
        self.slots = Slots(self.concurrency)
        self.threads = ThreadPool(self.concurrency)
        self.driver = ChainDriver(self.chain)
        flows = (
            FlowSteps(self.registry, backend, self.sealer.seal)
            if backend.capabilities.workflows
            else None
        )
        caps = backend.capabilities
        self.tallies = Tallies() if caps.job_stats and caps.worker_registry else None
        self.finisher = Finisher(self.driver, self.settler, self.keeper, flows, self.tallies)
        self.receiver = Receiver(
            self.registry,
            self.codec,
            self.keeper,
            self.finisher,
            self.locks,
            max_delay=backend.capabilities.max_delay,
            flows=flows,
            durable=self.durable,
        )
        self.runner = ThreadRunner(
            self.driver, self.finisher, self._deadline_loop, self._process_pool
        )
        if any(j.dedup is not None or j.unique is not None for j in self.registry.jobs.values()):
            self._renewal = LockRenewal(self.locks, self.keeper, fatal)
        # One read of the paused queues per half second for all of this worker's fetchers.
        paused = PauseWatch(backend).holds if caps.pause else None
        self.fetchers = [
            Fetcher(
                backend,
                q,
                self.slots,
                self._dispatch,
                self._stopping,
                visibility_timeout=self._default_vt(q),
                batch_size=self.batch_size,
                wait=self.wait,
                paused=paused,
                fatal=fatal,
            )
            for q in self.queues
        ]
        self.scheduler = (
            Scheduler(self.registry.periodics, self._stopping, fatal)
            if self.use_scheduler and self.registry.periodics
            else None
        )
        logs.logger.info(
            "worker started: queues=%s concurrency=%d backend=%s",
            ",".join(self.queues),
            self.concurrency,
            backend.url,
        )
        self.maintenance = Maintenance(backend.maintenance(), self.locks, fatal)
        self.announcer = Announcer(
            backend,
            queues=self.queues,
            concurrency=self.concurrency,
            running=self._running,
            on_stop=self.request_stop,
            tallies=self.tallies or Tallies(),
            every=self.announce_every,
        )
        self.cores = CoreWatch(lambda: self.slots.busy)
        self._loops = [*self.fetchers, self.keeper, self.settler, self.scheduler]
        for f in self.fetchers:
            f.start()
        if self.scheduler is not None:
            self.scheduler.start()
        self.maintenance.start()
        self.announcer.start()
        self._ready = True
        if self.fatal.reason is not None:  # a loop failed while the others started
            self._stop_after_failure()

    def _running(self) -> list[Running]:
        """What runs now, for the announcer: each task's message, job and start."""
        with self._mutex:
            tasks = list(self._active)
        return [
            Running(t.ctx.message.queue, t.ctx.message.id, t.job.name, t.ctx.started_at)
            for t in tasks
        ]

    def run(self, until_idle: bool = False, timeout: float | None = None) -> None:
        """Process messages until stopped, idle (`until_idle`) or `timeout` seconds passed.

        Idle means no job running, nothing to settle, the queues' stats showing nothing
        ready, delayed or in flight, and no message this worker released (a retry, a
        deferral) still on its way back: approximate stats (SQS) may miss those.
        """
        if until_idle and not self._started:
            self._returning = Returning(self.backend.capabilities.timer_resolution)
        self._run_thread = threading.current_thread()  # the one to shut down, if a loop fails
        # The handlers are in place before the worker says it started (a deploy's SIGTERM
        # right after must be graceful, not the default's kill) and cover the grace wait
        # and the flush too: a second signal must exit at once while the shutdown waits
        # on running jobs, not only while fetching.
        signals = (
            graceful_signals(self.request_stop) if self.handle_signals else contextlib.nullcontext()
        )
        with signals:
            self.start()
            if until_idle:
                # The run ends right after the queues empty: a fetcher blocked for its whole
                # `wait` would hold the stop up by that long.
                for f in self.fetchers:
                    f.wait = min(f.wait, IDLE_CHECK)
            self._running_loop = True
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                self._loop_until(until_idle, deadline)
            finally:
                self._shutdown()
                self._running_loop = False
        if self.fatal.reason is not None:
            raise LoopFailed(f"the worker stopped: {self.fatal.reason}")

    def _loop_until(self, until_idle: bool, deadline: float | None) -> None:
        tick = IDLE_CHECK if until_idle or deadline is not None else 1.0
        while not self._stop_requested.wait(tick):
            self.cores.tick()
            if deadline is not None and time.monotonic() >= deadline:
                return
            if until_idle and self._idle():
                return

    def _loop_failed(self, reason: str) -> None:
        """A loop could not go on: stop now (no grace: what runs could not be settled)."""
        if self.handle_signals:
            exit_later()
        self.request_stop(grace=0.0)
        if self._ready:
            self._stop_after_failure()

    def _stop_after_failure(self) -> None:
        """Shut down once, here, unless `run` is the one that will (it was asked to stop)."""
        with self._mutex:
            if self._run_thread is not None or self._failure_stop:
                return
            self._failure_stop = True
        threading.Thread(target=self._shutdown, name="tasuki-stop", daemon=True).start()

    def request_stop(self, grace: float | None = None) -> None:
        """Ask for a graceful stop without waiting for it (safe from signal handlers)."""
        self._requested_grace = grace
        self._stop_requested.set()

    def stop(self, grace: float | None = None) -> None:
        """Stop gracefully: running jobs get `grace` seconds, then are released unharmed."""
        self.request_stop(grace)
        if not self._started:
            return
        if self._running_loop:
            if threading.current_thread() is not self._run_thread:
                self._stopped.wait()
        else:
            self._shutdown()

    def join(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def pulses(self) -> list[Pulse]:
        """The signs of life of this worker's loops, for its health checks (`health.py`)."""
        loops = [*self._loops, self._loop] if self._loops else []
        return [loop.pulse for loop in loops if loop is not None]

    # -- plumbing ----------------------------------------------------------------------------------
    def _default_vt(self, queue: str) -> float:
        consumer = self.registry.consumers.get(queue)
        return consumer.visibility_timeout if consumer else DEFAULT_VISIBILITY_TIMEOUT

    def _process_pool(self) -> ProcessPool:
        from tasuki.runtime.processes import ProcessPool  # multiprocessing: only when used

        with self._mutex:
            if self._pool is None:
                self._pool = ProcessPool(self.processes)
            return self._pool

    def _deadline_loop(self) -> Deadlines:
        with self._mutex:
            if self._deadlines is None:
                self._deadlines = Deadlines()
            return self._deadlines

    def _event_loop(self) -> tuple[EventLoopThread, AsyncRunner]:
        # asyncio: only when used
        from tasuki.runtime.eventloop import AsyncRunner, EventLoopThread

        with self._mutex:
            if self._loop is None or self._async is None:
                self._loop = EventLoopThread(guard=self.fatal.guard)
                self._async = AsyncRunner(self.driver, self.finisher)
            return self._loop, self._async

    def _dispatch(self, deliveries: list[Delivery], asked: float | None = None) -> None:
        """On the fetcher's thread: start a leased batch (see `pace.py` for what runs
        here); `asked`: when its lease was asked for (wall clock)."""
        pace = self.pace
        if self._returning is not None:
            self._returning.leased((d.queue, d.id) for d in deliveries)
        tasks = self.receiver.receive_many(deliveries, asked)
        settled_here = len(deliveries) - len(tasks)
        if settled_here:
            self.slots.give_back(settled_here)
        with self._mutex:
            self._active.update(tasks)
        inline: list[Task] = []
        for task in tasks:
            if task.job.executor == "async":
                loop, runner = self._event_loop()
                loop.submit(lambda t=task, r=runner: self._run_async(r, t))  # type: ignore[misc]
            elif pace.inline(task.job):
                inline.append(task)
            else:
                self.threads.submit(lambda t=task: self._run_pooled(t))  # type: ignore[misc]
        if inline:
            if not self._stopping.is_set():
                rest = self.runner.run_inline(inline, pace, BATCH_BUDGET)
                self._done_many(inline[: len(inline) - len(rest)])
                inline = rest
            for task in inline:
                self.threads.submit(lambda t=task: self._run_pooled(t))  # type: ignore[misc]

    def _run_pooled(self, task: Task) -> None:
        started = time.perf_counter()
        try:
            self.runner.run(task)
        finally:
            self._done_one(task)
        if self.pace.eligible(task.job):
            self.pace.record(task.job, time.perf_counter() - started)

    async def _run_async(self, runner: AsyncRunner, task: Task) -> None:
        try:
            await runner.run(task)
        finally:
            self._done_one(task)

    def _done_one(self, task: Task) -> None:
        with self._mutex:
            self._active.discard(task)
            self.processed += 1
        self.slots.give_back(1)

    def _done_many(self, tasks: list[Task]) -> None:
        with self._mutex:
            self._active.difference_update(tasks)
            self.processed += len(tasks)
        self.slots.give_back(len(tasks))

    def _idle(self) -> bool:
        if self._active or self.settler.pending or not all(f.empty for f in self.fetchers):
            return False
        if self._returning is not None and self._returning.expected():
            return False
        try:
            for q in self.queues:
                s = self.backend.stats(q)
                if s.ready or s.in_flight or s.delayed:
                    return False
        except TasukiError:
            return False
        return not self._active and not self.settler.pending

    def _shutdown(self) -> None:
        if self._stopping.is_set():
            self._stopped.wait()
            return
        grace = self.grace if self._requested_grace is None else self._requested_grace
        self._stopping.set()
        with self._mutex:
            running = list(self._active)
        if running:
            logs.logger.info("worker stopping: %d job(s) running, %.1fs grace", len(running), grace)
        for f in self.fetchers:
            f.join(self.wait + 1.0)
        for task in running:
            task.ctx.request_stop("shutdown")
        if not self.slots.wait_all_free(grace):
            self._release_remaining()
        if self.scheduler is not None:
            self.scheduler.join(2.0)
        self.maintenance.stop()
        self.settler.stop(timeout=10.0)
        self.announcer.stop()
        self.keeper.stop()
        if self._renewal is not None:
            self._renewal.stop()
        if self._deadlines is not None:
            self._deadlines.stop()
        self.threads.shutdown()
        if self._loop is not None:
            self._loop.stop()
        if self._pool is not None:
            self._pool.shutdown()
        logs.logger.info(
            "worker stopped: %d processed, %d released on shutdown",
            self.processed,
            self.released_on_shutdown,
        )
        self._stopped.set()

    def _release_remaining(self) -> None:
        with self._mutex:
            remaining = list(self._active)
        for task in remaining:
            if self.finisher.release_on_shutdown(task):
                self.released_on_shutdown += 1
            async_task = task.async_task
            if async_task is not None and self._loop is not None:
                self._loop.call(lambda t=async_task: t.cancel() and None)  # type: ignore[misc]
        if self._pool is not None:
            self._pool.shutdown()
        # Give cancelled tasks and killed children a moment to unwind.
        self.slots.wait_all_free(0.5)

    def __repr__(self) -> str:
        return f"<Worker queues={self.queues} concurrency={self.concurrency}>"

    def stats(self) -> dict[str, Any]:
        return {
            "processed": self.processed,
            "running": self.slots.busy if self._started else 0,
            "leases_lost": self.keeper.lost if self._started else 0,
        }
