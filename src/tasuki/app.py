"""The application object: jobs and consumers by name, the backend, the middleware chain."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from tasuki.backends.base import DEFAULT_VISIBILITY_TIMEOUT, Backend, Envelope, LockStore
from tasuki.backends.urls import DEFAULT_URL, backend_from_url, redact
from tasuki.errors import ConfigurationError, InvalidArgument, MessageTooLarge, UnknownJob
from tasuki.job import (
    EXECUTORS,
    Enqueuer,
    Executor,
    Job,
    check_delay,
    check_headers,
    check_message_id,
    check_queue,
)
from tasuki.message import JOB_HEADER, DeadLetter, Message, new_id, new_ids
from tasuki.middleware import default_middleware
from tasuki.middleware.base import EnqueueNext, MiddlewareChain, Outgoing, build_enqueue
from tasuki.policies import Dedup, Retry, Unique
from tasuki.serialization import Codec, Serializer

if TYPE_CHECKING:
    from tasuki.backends.base import Enqueued
    from tasuki.periodic import Periodic
    from tasuki.runtime.worker import Worker

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_ID_WINDOW = 3600.0
_CORE_OPTIONS = frozenset(
    {
        "queue",
        "retry",
        "timeout",
        "visibility_timeout",
        "dedup",
        "unique",
        "on_exhausted",
        "name",
        "executor",
    }
)


class App:
    """Where jobs are declared and messages enter.

    `url` picks the backend (else `TASUKI_URL`, else `sqlite:///tasuki.db`).
    `id_window` is how long a finished caller-given message id still makes a repeated
    enqueue a no-op.
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
        locks: LockStore | None = None,
    ) -> None:
        self.url = url or os.environ.get("TASUKI_URL") or DEFAULT_URL
        if id_window < 0:
            raise InvalidArgument(f"id_window must be >= 0 seconds, got {id_window!r}")
        self.backend: Backend = backend if backend is not None else backend_from_url(self.url)
        self.codec = Codec(
            serializer, signing_key if not isinstance(signing_key, str) else signing_key.encode()
        )
        self.id_window = float(id_window)
        limit = self.backend.capabilities.max_message_size
        self.max_message_size = min(limit, max_message_size) if max_message_size else limit
        self.default_queue = check_queue(default_queue)
        self.middleware = MiddlewareChain(
            list(middleware) if middleware is not None else default_middleware()
        )
        self.jobs: dict[str, Job[..., Any]] = {}
        self.consumers: dict[str, Job[..., Any]] = {}
        self.periodics: list[Periodic] = []
        self._enqueue_chain: tuple[int, EnqueueNext] | None = None
        self._locks = locks

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
        from tasuki.periodic import Periodic

        Periodic.check_schedule(cron, every)

        def decorate(f: Callable[P, R]) -> Job[P, R]:
            job = f if isinstance(f, Job) else self._register(f, options, consumer=False)
            self.periodics.append(
                Periodic.create(job, cron=cron, every=every, args=args, kwargs=kwargs)
            )
            return job  # type: ignore[return-value]

        return decorate

    def _register(self, fn: Any, options: dict[str, Any], *, consumer: bool) -> Job[..., Any]:
        if not callable(fn):
            raise InvalidArgument(f"a job must be a function, got {fn!r}")
        unknown = set(options) - _CORE_OPTIONS - self.middleware.owned_options()
        if unknown:
            raise ConfigurationError(
                f"unknown job option(s) {sorted(unknown)} for {getattr(fn, '__name__', fn)!r}; "
                "no installed middleware declares them"
            )
        name = options.get("name") or getattr(fn, "__name__", None)
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"cannot name job {fn!r}: pass name=...")
        if name in self.jobs:
            raise ConfigurationError(f"a job named {name!r} is already registered on this app")
        retry = options.get("retry")
        if retry is None:
            retry = Retry()
        elif not isinstance(retry, Retry):
            raise InvalidArgument(f"retry must be a tasuki.Retry, got {retry!r}")
        dedup = options.get("dedup")
        if dedup is True:
            dedup = Dedup()
        elif dedup is False:
            dedup = None
        elif dedup is not None and not isinstance(dedup, Dedup):
            raise InvalidArgument(f"dedup must be True, False or a tasuki.Dedup, got {dedup!r}")
        unique = options.get("unique")
        if unique is not None and not isinstance(unique, Unique):
            raise InvalidArgument(f"unique must be a tasuki.Unique or None, got {unique!r}")
        timeout = options.get("timeout")
        if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
            raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout!r}")
        vt = options.get("visibility_timeout", DEFAULT_VISIBILITY_TIMEOUT)
        if not isinstance(vt, int | float) or vt <= 0:
            raise InvalidArgument(f"visibility_timeout must be > 0 seconds, got {vt!r}")
        on_exhausted = options.get("on_exhausted")
        if on_exhausted is not None and not callable(on_exhausted):
            raise InvalidArgument("on_exhausted must be callable(message, error)")
        executor = options.get("executor", "auto")
        if executor not in EXECUTORS:
            raise InvalidArgument(f"executor must be one of {EXECUTORS}, got {executor!r}")
        job: Job[..., Any] = Job(
            self,
            fn,
            name=name,
            queue=self.default_queue if options.get("queue") is None else options["queue"],
            retry=retry,
            timeout=float(timeout) if timeout is not None else None,
            visibility_timeout=float(vt),
            dedup=dedup,
            unique=unique,
            on_exhausted=on_exhausted,
            executor=executor,
            consumer=consumer,
            extra={k: v for k, v in options.items() if k not in _CORE_OPTIONS},
        )
        if consumer:
            if job.queue in self.consumers:
                raise ConfigurationError(f"queue {job.queue!r} already has a consumer")
            self.consumers[job.queue] = job
        self.jobs[name] = job
        return job

    def get_job(self, name: str) -> Job[..., Any]:
        try:
            return self.jobs[name]
        except KeyError:
            raise UnknownJob(f"no job named {name!r} is registered on this app") from None

    # -- producing -------------------------------------------------------------------
    def enqueue_calls(
        self,
        job: Job[..., Any],
        calls: Sequence[tuple[tuple[Any, ...], Mapping[str, Any]]],
        bound: Enqueuer[Any] | None = None,
    ) -> list[str]:
        if job.consumer:
            raise InvalidArgument(f"{job.name!r} consumes raw messages: use app.send(queue, body)")
        drafts = []
        given = bound.message_id if bound is not None else None
        ids = new_ids(len(calls)) if given is None else [given] * len(calls)
        for (args, kwargs), message_id in zip(calls, ids, strict=True):
            job.check_arguments(args, kwargs)
            drafts.append(
                Outgoing(
                    queue=bound.queue if bound else job.queue,
                    id=message_id,
                    job=job,
                    args=args,
                    kwargs=kwargs,
                    headers={**(bound.headers if bound else {}), JOB_HEADER: job.name},
                    delay=bound.delay if bound else 0.0,
                    max_attempts=job.retry.max_attempts,
                    visibility_timeout=job.visibility_timeout,
                    keep_id=self.id_window if given else 0.0,
                    id_given=given is not None,
                )
            )
        return [result.id for result in self.enqueue_outgoing(drafts)]

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
        check_queue(queue)
        consumer = self.consumers.get(queue)
        given = check_message_id(message_id) if message_id is not None else None
        draft = Outgoing(
            queue=queue,
            id=given or new_id(),
            job=consumer,
            body=bytes(body),
            headers=check_headers(headers),
            delay=check_delay(delay, eta),
            max_attempts=consumer.retry.max_attempts if consumer else Retry().max_attempts,
            visibility_timeout=consumer.visibility_timeout if consumer else None,
            keep_id=self.id_window if given else 0.0,
            id_given=given is not None,
        )
        return self.enqueue_outgoing([draft])[0].id

    def enqueue_outgoing(self, drafts: list[Outgoing]) -> list[Enqueued]:
        """Run drafts through the client middleware, then store them in one backend call."""
        cached = self._enqueue_chain
        if cached is None or cached[0] != self.middleware.version:
            cached = self._enqueue_chain = (
                self.middleware.version,
                build_enqueue(self.middleware, self._store),
            )
        return cached[1](drafts)

    def _store(self, drafts: list[Outgoing]) -> list[Enqueued]:
        envelopes = [self._envelope(d) for d in drafts]
        if not envelopes:
            return []
        return self.backend.enqueue(envelopes)

    def _envelope(self, d: Outgoing) -> Envelope:
        codec = self.codec
        headers = d.headers  # the draft's own dict: copied only if something is added
        if d.body is None:
            name = d.job.name if d.job else "?"
            body = codec.encode_payload(name, d.args, d.kwargs)
            if codec.content_headers:
                headers = {**headers, **codec.content_headers}
        else:
            body = d.body
        if codec.signs:
            headers = dict(headers)
            codec.sign(d.queue, headers, body)
        size = len(body) + sum(len(k) + len(v) for k, v in headers.items())
        if size > self.max_message_size:
            what = f"job {d.job.name!r}" if d.job else f"queue {d.queue!r}"
            raise MessageTooLarge(
                f"message for {what} is {size:,} bytes; the limit is {self.max_message_size:,} "
                "bytes (pass large data by reference, e.g. a storage key)"
            )
        return Envelope(
            d.queue,
            d.id,
            body,
            headers,
            d.delay,
            d.max_attempts,
            d.visibility_timeout,
            d.keep_id,
            d.unique,
        )

    @property
    def locks(self) -> LockStore:
        """The lock service behind dedup and uniqueness (the backend's own by default)."""
        return self._locks if self._locks is not None else self.backend.locks

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str | None = None) -> dict[str, float]:
        return self.backend.stats(check_queue(queue or self.default_queue)).as_dict()

    def queues(self) -> list[str]:
        known = {j.queue for j in self.jobs.values()} | set(self.backend.queues())
        return sorted(known)

    def dead_letters(
        self, queue: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[DeadLetter]:
        return self.backend.dead_letters(check_queue(queue or self.default_queue), limit, offset)

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        return self.backend.dead_letter(check_queue(queue), id)

    def redrive(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        """Send dead letters back to the queue with attempts reset; all of them by default."""
        if isinstance(ids, str):
            ids = [ids]
        return self.backend.redrive(check_queue(queue or self.default_queue), ids)

    def purge(self, queue: str | None = None) -> int:
        """Remove every message of the queue, whatever its state."""
        return self.backend.purge(check_queue(queue or self.default_queue))

    def purge_dead(self, queue: str | None = None) -> int:
        return self.backend.purge_dead(check_queue(queue or self.default_queue))

    # -- consuming -------------------------------------------------------------------
    def worker(
        self,
        queues: Sequence[str] | str | None = None,
        concurrency: int = 8,
        **options: Any,
    ) -> Worker:
        from tasuki.runtime.worker import Worker

        return Worker(self, queues=queues, concurrency=concurrency, **options)

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
