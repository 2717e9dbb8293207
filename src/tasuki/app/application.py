"""The application object: jobs and consumers by name, the backend, the middleware chain.

What a job's options mean and how they are checked is `declaring.py`; reading and
cancelling workflows is `flows.py`; here, the wiring and the façade over the backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from tasuki.app import console, durable, flows
from tasuki.app.declaring import declare
from tasuki.backends.base import DEFAULT_VISIBILITY_TIMEOUT, Backend, LockStore
from tasuki.backends.urls import DEFAULT_URL, backend_from_url, redact
from tasuki.core.admission import check_aging
from tasuki.core.codec import Codec, Serializer
from tasuki.core.console import BrowseState, JobStats, Listed, Page, WorkerInfo
from tasuki.core.flows import FlowState
from tasuki.core.job import Executor, Job, check_delay, check_message_id, check_queue
from tasuki.core.message import DeadLetter, Message
from tasuki.core.policies import ConcurrencyLimit, Dedup, RateLimit, Retry, Unique
from tasuki.core.records import CancelStatus, MessageInfo
from tasuki.core.registry import Registry
from tasuki.core.steps import DEFAULT_MAX_STEPS, check_max_steps
from tasuki.errors import ConfigurationError, InvalidArgument
from tasuki.middleware import default_middleware
from tasuki.middleware.base import MiddlewareChain
from tasuki.producer import DEFAULT_ID_WINDOW, Producer

if TYPE_CHECKING:
    from tasuki.core.periodic import Periodic
    from tasuki.runtime.worker import Worker

P = ParamSpec("P")
R = TypeVar("R")


class App:
    """Where jobs are declared and messages enter, and the one place that wires the parts.

    `url` picks the backend (else `TASUKI_URL`, else `sqlite:///tasuki.db`).
    `id_window` is how long a finished caller-given message id still makes a repeated
    enqueue a no-op. `locks` is the lock store of dedup and uniqueness when the backend
    has none of its own (a `LockStore`, or the URL of a backend whose locks to use).
    `priority_aging`: seconds of waiting that count as one priority level (the backend's
    own 300 s when None); give every App of a deployment the same. `max_steps`: how
    many durable step records one message may hold (`ctx.step`; past it, an error).
    `serializer="pickle"` needs a `signing_key`: a worker unpickles what it receives, so
    without signatures anyone who can write to a queue runs code in the workers.
    `allow_unsigned_pickle=True` accepts that (a backend only trusted writers reach).

    Nothing below holds the app: jobs hold the producer, the worker gets the registry,
    backend, lock store, codec and chain.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        serializer: str | Serializer = "json",
        signing_key: bytes | str | None = None,
        id_window: float = DEFAULT_ID_WINDOW,
        max_message_size: int | None = None,
        default_queue: str = "default",
        middleware: Sequence[Any] | None = None,
        backend: Backend | None = None,
        locks: LockStore | str | None = None,
        priority_aging: float | None = None,
        allow_unsigned_pickle: bool = False,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        _check_pickle(serializer, signing_key, allow_unsigned_pickle)
        self.url = url or os.environ.get("TASUKI_URL") or DEFAULT_URL
        self.backend: Backend = backend if backend is not None else backend_from_url(self.url)
        if priority_aging is not None:
            self.backend.priority_aging = check_aging(priority_aging)
        self.codec = Codec(
            serializer, signing_key if not isinstance(signing_key, str) else signing_key.encode()
        )
        self.default_queue = check_queue(default_queue)
        self.middleware = MiddlewareChain(
            list(middleware) if middleware is not None else default_middleware()
        )
        self.registry = Registry()
        self._max_message_size = max_message_size
        self.producer = self._producer(self.backend, id_window)
        self._locks = backend_from_url(locks).locks if isinstance(locks, str) else locks
        self.max_steps = check_max_steps(max_steps)

    def _producer(self, backend: Backend, id_window: float) -> Producer:
        return Producer(
            backend,
            self.codec,
            self.middleware,
            id_window=id_window,
            max_message_size=self._max_message_size,
            consumer_of=self.registry.consumers.get,
        )

    def use_backend(self, backend: Backend, locks: LockStore | None = None) -> Callable[[], None]:
        """Store on `backend` from now on, every job of the app included, and take locks
        from `locks`, else from the backend. Returns the function that puts back what the
        app used until now.

        For tests: `tasuki.testing.use_memory` runs an app declared for production on a
        fresh `memory://` store. A worker already running keeps what it was given.
        """
        previous = (self.backend, self._locks, self.url, self.producer)
        self.backend, self._locks, self.url = backend, locks, backend.url
        self._bind(self._producer(backend, self.producer.id_window))

        def restore() -> None:
            self.backend, self._locks, self.url, producer = previous
            self._bind(producer)

        return restore

    def _bind(self, producer: Producer) -> None:
        self.producer = producer
        for job in self.registry.jobs.values():
            job.producer = producer

    @property
    def jobs(self) -> dict[str, Job[..., Any]]:
        return self.registry.jobs

    @property
    def consumers(self) -> dict[str, Job[..., Any]]:
        return self.registry.consumers

    @property
    def periodics(self) -> list[Periodic]:
        return self.registry.periodics

    @property
    def id_window(self) -> float:
        return self.producer.id_window

    @property
    def max_message_size(self) -> int:
        return self.producer.max_message_size

    def __repr__(self) -> str:
        return f"<tasuki.App {redact(self.url)}>"

    # -- declaring -------------------------------------------------------------------
    @overload
    def job(self, fn: Callable[P, R], /) -> Job[P, R]: ...

    @overload
    def job(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        dedup: bool | Dedup | None = None,
        unique: Unique | None = None,
        on_exhausted: Callable[[Message, BaseException], Any] | None = None,
        executor: Executor = "auto",
        priority: int = 0,
        rate_limit: RateLimit | None = None,
        concurrency_limit: ConcurrencyLimit | None = None,
        keep_result: float | None = None,
        **options: Any,
    ) -> Callable[[Callable[P, R]], Job[P, R]]: ...

    def job(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a function as a job: `@app.job` or `@app.job(queue=..., retry=...)`."""
        if fn is not None:
            return self._register(fn, options, consumer=False)

        def decorate(f: Callable[P, R]) -> Job[P, R]:
            return self._register(f, options, consumer=False)  # type: ignore[return-value]

        return decorate

    def consumer(
        self, queue: str, **options: Any
    ) -> Callable[[Callable[[Message], Any]], Job[..., Any]]:
        """Handle raw messages of `queue` (not produced by tasuki): the handler gets the Message."""
        check_queue(queue)

        def decorate(f: Callable[[Message], Any]) -> Job[..., Any]:
            options.setdefault("name", f"consumer:{queue}")
            return self._register(f, {**options, "queue": queue}, consumer=True)

        return decorate

    def periodic(
        self,
        cron: str | None = None,
        *,
        every: timedelta | float | None = None,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Callable[[Callable[P, R]], Job[P, R]]:
        """Register a job enqueued on a schedule, once per tick however many workers run it."""
        from tasuki.core.periodic import Periodic

        Periodic.check_schedule(cron, every)
        self.backend.require(
            "id_window",
            "run periodic jobs (they make one message per tick by its id: idempotent enqueue)",
            "give it a lock store (locks=...)",
        )

        def decorate(f: Callable[P, R]) -> Job[P, R]:
            job = f if isinstance(f, Job) else self._register(f, options, consumer=False)
            self.periodics.append(
                Periodic.create(job, cron=cron, every=every, args=args, kwargs=kwargs)
            )
            return job  # type: ignore[return-value]

        return decorate

    def _register(self, fn: Any, options: dict[str, Any], *, consumer: bool) -> Job[..., Any]:
        return declare(
            fn,
            options,
            consumer=consumer,
            backend=self.backend,
            producer=self.producer,
            middleware=self.middleware,
            registry=self.registry,
            default_queue=self.default_queue,
            has_locks=self._locks is not None,
        )

    def get_job(self, name: str) -> Job[..., Any]:
        return self.registry.get(name)

    # -- producing -------------------------------------------------------------------
    def send(
        self,
        queue: str,
        body: bytes | str,
        *,
        delay: float | None = None,
        eta: datetime | float | None = None,
        headers: Mapping[str, str] | None = None,
        message_id: str | None = None,
    ) -> str:
        """Enqueue a raw message, for a `@app.consumer` or any other reader of the queue."""
        if isinstance(body, str):
            body = body.encode()
        if not isinstance(body, bytes | bytearray | memoryview):
            raise InvalidArgument(f"send() takes bytes or str as body, got {type(body).__name__}")
        return self.producer.send(
            check_queue(queue),
            bytes(body),
            delay=check_delay(delay, eta),
            headers=headers,
            message_id=message_id,
        )

    @property
    def locks(self) -> LockStore:
        """The lock service behind dedup and uniqueness (the backend's own by default)."""
        return self._locks if self._locks is not None else self.backend.locks

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str | None = None) -> dict[str, float]:
        return self.backend.stats(check_queue(queue or self.default_queue)).as_dict()

    def queues(self) -> list[str]:
        known = self.registry.queues() | set(self.backend.queues())
        return sorted(known)

    def dead_letters(
        self, queue: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[DeadLetter]:
        return self.backend.dead_letters(check_queue(queue or self.default_queue), limit, offset)

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        return self.backend.dead_letter(check_queue(queue), id)

    def inspect(self, queue: str, message_id: str) -> MessageInfo:
        """What happened to one message: state, attempts, lease, fencing number, history,
        the workflow it is a step of, and its job and arguments where the backend reads
        the body back (decoded as listings decode them)."""
        queue = check_queue(queue)
        info, body, headers = self.backend.inspect_body(queue, message_id)
        if body is not None:
            info = console.decoded(self.codec, queue, Listed(info, body, headers, ""))
        return durable.with_steps(self.backend, flows.place(self.backend, info))

    def signal(self, queue: str, message_id: str, name: str, payload: Any = None) -> str:
        """Send signal `name` with its JSON `payload` to a message: "delivered" (stored for
        it; a message waiting for it in `ctx.wait_for_signal` is ready at once, one that
        waits later finds it; consumed once) or "unknown" (no such message, or dead)."""
        return durable.signal(self.backend, queue, message_id, name, payload)

    def result(self, queue: str, message_id: str, timeout: float | None = None) -> Any:
        """The return value of message `message_id` on `queue` (its job has `keep_result=`),
        waiting up to `timeout` seconds (None: as long as it takes). `JobFailed` if it was
        dead-lettered, `ResultTimeout` if not done in time, `ResultMissing` at once if no
        result will come."""
        return self.producer.result(queue, message_id, timeout)

    async def result_async(self, queue: str, message_id: str, timeout: float | None = None) -> Any:
        """`result` without blocking the event loop."""
        return await self.producer.result_async(queue, message_id, timeout)

    # -- workflows (`app/flows.py`) --------------------------------------------------------
    def flow(self, flow_id: str) -> FlowState:
        """A flow's state ("running", "succeeded", "failed", "cancelled"), each step's
        (job, queue, message_id, state, attempt) from `inspect`, its result and its first
        failure. `UnknownFlow` if no flow has this id."""
        return flows.state(self.backend, self.producer, flow_id)

    def flow_result(self, flow_id: str, timeout: float | None = None) -> Any:
        """The flow's result (its last step's; a group's list), waiting up to `timeout`
        seconds (None: as long as it takes). `JobFailed` if a step was dead-lettered (the
        first one, with its error), `FlowCancelled`, `ResultTimeout` if not done in time,
        `UnknownFlow` at once for an unknown id."""
        return flows.result(self.backend, self.producer, flow_id, timeout)

    def cancel_flow(self, flow_id: str) -> FlowState:
        """Cancel a flow: nothing more of it is enqueued (the settles of its steps read the
        flag), its waiting steps are removed and its running ones signalled, as
        `app.cancel` does. Returns its state. `UnknownFlow` if no flow has this id."""
        return flows.cancel(self.backend, self.producer, flow_id)

    def cancel(self, queue: str, message_id: str) -> CancelStatus:
        """Cancel a message: "removed" (it was waiting), "signalled" (it runs: its job sees
        `ctx.cancelled` at its next heartbeat, and nothing of that run is kept), or
        "unknown" (finished, dead, already cancelled, or never enqueued). A step of a
        workflow cancels its flow with it: left alone, the flow would wait for a step
        that never ends, `running` for ever."""
        self.backend.require("cancel", "cancel a message")
        status = self.backend.cancel(check_queue(queue), check_message_id(message_id))
        if status != "unknown":
            flows.cancel_flow_of(self.backend, self.producer, queue, message_id)
        return status

    def redrive(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        """Send dead letters back to the queue with attempts reset; all of them by default."""
        if isinstance(ids, str):
            ids = [ids]
        return self.backend.redrive(check_queue(queue or self.default_queue), ids)

    def purge(self, queue: str | None = None) -> int:
        """Remove every message of the queue, whatever its state. The flows whose steps
        it removes are not told (cancel them first, `cancel_flow`): a purge is for a
        queue's contents, not for the workflows that pass through it."""
        return self.backend.purge(check_queue(queue or self.default_queue))

    def purge_dead(self, queue: str | None = None) -> int:
        return self.backend.purge_dead(check_queue(queue or self.default_queue))

    # -- the console (`app/console.py`, DESIGN §4d) ----------------------------------------
    def pause(self, queue: str) -> None:
        """Hold a queue: within a second no worker leases from it. Enqueue still works,
        delayed messages still come due (and wait), cancel, inspect and browse work."""
        self.backend.pause(check_queue(queue))

    def resume(self, queue: str) -> None:
        self.backend.resume(check_queue(queue))

    def paused(self) -> set[str]:
        return self.backend.paused()

    def messages(
        self,
        queue: str,
        state: str = "ready",
        *,
        job: str | None = None,
        match: Mapping[str, Any] | None = None,
        newest_first: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[MessageInfo]:
        """A page of the queue's messages in `state` ("ready", "delayed", "in_flight",
        "dead"), oldest first unless `newest_first`, of `job` only and whose arguments
        equal `match` (keyword ones by name, positional ones by "0", "1", ...). Pass
        `page.cursor` back for the next page (None at the end). With `match`, one call
        reads a bounded number of messages: a page may hold fewer than `limit` and still
        have a cursor. Listing never changes a message."""
        return console.messages(
            self.backend,
            self.codec,
            queue,
            state,
            job=job,
            match=match,
            newest_first=newest_first,
            limit=limit,
            cursor=cursor,
        )

    def retry_now(self, queue: str, message_id: str) -> bool:
        """A delayed (or retry-scheduled) message: ready now. False if it is no longer
        delayed (it ran, was cancelled, or never existed)."""
        return self.backend.retry_now(check_queue(queue), check_message_id(message_id))

    def retry_matching(
        self,
        queue: str,
        state: str = "delayed",
        *,
        job: str | None = None,
        match: Mapping[str, Any] | None = None,
    ) -> int:
        """Make every message the filter matches ready now ("delayed": cut short, "dead":
        re-driven), in batches, each only if still in `state`; returns how many."""
        return console.act_on_matching(
            self.backend, self.codec, queue, state, self.backend.retry_many, job=job, match=match
        )

    def cancel_matching(
        self,
        queue: str,
        state: str = "ready",
        *,
        job: str | None = None,
        match: Mapping[str, Any] | None = None,
    ) -> int:
        """Cancel every message the filter matches (a dead one: removed), in batches, each
        only if still in `state`; returns how many. Steps of workflows cancel their
        flows, as `cancel` does."""

        def cancel_many(queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
            changed = self.backend.cancel_many(queue, ids, state)
            for message_id, done in zip(ids, changed, strict=True):
                if done:
                    flows.cancel_flow_of(self.backend, self.producer, queue, message_id)
            return changed

        return console.act_on_matching(
            self.backend, self.codec, queue, state, cancel_many, job=job, match=match
        )

    def workers(self) -> list[WorkerInfo]:
        """The workers seen within a day, each with what it runs now; `gone` after three
        missed heartbeats."""
        return self.backend.workers()

    def stop_worker(self, worker_id: str) -> bool:
        """Ask a worker to drain and exit as on SIGTERM (at its next heartbeat); False if
        no such worker is known."""
        return self.backend.stop_worker(worker_id)

    def job_stats(self, queue: str | None = None, window: float = 3600.0) -> dict[str, JobStats]:
        """Each job's outcomes and run-time percentiles (seconds) on the queue over the
        last `window` seconds, from the backend's per-minute rollups."""
        if not window > 0:
            raise InvalidArgument(f"window must be > 0 seconds, got {window!r}")
        return self.backend.job_stats(check_queue(queue or self.default_queue), float(window))

    # -- consuming -------------------------------------------------------------------
    def worker(
        self,
        queues: Sequence[str] | str | None = None,
        concurrency: int = 8,
        **options: Any,
    ) -> Worker:
        from tasuki.runtime.worker import Worker

        return Worker(
            self.registry,
            self.backend,
            locks=self.locks,
            codec=self.codec,
            chain=self.middleware,
            default_queue=self.default_queue,
            queues=queues,
            concurrency=concurrency,
            sealer=self.producer.sealer,
            **{"max_steps": self.max_steps, **options},
        )

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_pickle(
    serializer: str | Serializer, signing_key: bytes | str | None, allowed: bool
) -> None:
    """Refuse pickle without signatures unless the caller said it is fine."""
    content_type = serializer if isinstance(serializer, str) else serializer.content_type
    if content_type == "pickle" and not signing_key and not allowed:
        raise ConfigurationError(
            'serializer="pickle" without a signing_key lets anyone who can write to a '
            "queue run code in your workers: give signing_key=... (the same on producers "
            "and workers), or allow_unsigned_pickle=True if only trusted code can write "
            "to the backend"
        )
