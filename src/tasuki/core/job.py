"""Jobs: a function registered on an app, and the ways of enqueueing it."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    TypeVar,
    overload,
)

from tasuki.core import headers as tasuki_headers
from tasuki.core.policies import (
    ConcurrencyLimit,
    Dedup,
    RateLimit,
    Retry,
    Unique,
    check_priority,
)
from tasuki.core.text import check_name
from tasuki.errors import InvalidArgument

if TYPE_CHECKING:
    from tasuki.core.message import Message

P = ParamSpec("P")
R = TypeVar("R")
# A step in a chain takes its predecessor's result first: its own arguments are the rest.
Q = ParamSpec("Q")

Executor = Literal["auto", "thread", "async", "process"]
EXECUTORS = ("auto", "thread", "async", "process")
MAX_ID_LENGTH = 256


def check_delay(delay: float | None, eta: datetime | float | None = None) -> float:
    """Turn `delay` (seconds) or `eta` (datetime or epoch seconds) into a delay >= 0."""
    if delay is not None and eta is not None:
        raise InvalidArgument("give either delay or eta, not both")
    if eta is not None:
        if isinstance(eta, datetime):
            eta = eta.timestamp()
        if not isinstance(eta, int | float) or isinstance(eta, bool):
            raise InvalidArgument(f"eta must be a datetime or epoch seconds, got {eta!r}")
        return max(0.0, float(eta) - time.time())
    if delay is None:
        return 0.0
    if isinstance(delay, bool) or not isinstance(delay, int | float):
        raise InvalidArgument(f"delay must be a number of seconds, got {delay!r}")
    if not math.isfinite(delay) or delay < 0:
        raise InvalidArgument(f"delay must be a finite number of seconds >= 0, got {delay!r}")
    return float(delay)


def check_message_id(message_id: object) -> str:
    if not isinstance(message_id, str) or not message_id:
        raise InvalidArgument(f"message_id must be a non-empty string, got {message_id!r}")
    if len(message_id) > MAX_ID_LENGTH:
        raise InvalidArgument(f"message_id is longer than {MAX_ID_LENGTH} characters")
    return check_name("message_id", message_id)


def check_queue(queue: object) -> str:
    if not isinstance(queue, str) or not queue or len(queue) > 200:
        raise InvalidArgument(
            f"queue must be a non-empty string of at most 200 chars, got {queue!r}"
        )
    if any(c in queue for c in "{}\0\n"):
        raise InvalidArgument(f"queue name {queue!r} may not contain braces, NUL or newlines")
    return check_name("queue name", queue)


def check_job_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > tasuki_headers.MAX_NAME:
        raise InvalidArgument(
            f"a job name must be a non-empty string of at most {tasuki_headers.MAX_NAME} "
            f"chars, got {name!r:.80}"
        )
    return check_name("job name", name)


def check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Headers as a dict of str to str that every engine stores, whose `tasuki-*` values
    a worker would believe (`core/headers.py`)."""
    result = dict(headers or {})
    for k, v in result.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidArgument(f"headers must map str to str, got {k!r}: {v!r}")
        check_name("header name", k)
        check_name(f"header {k}", v)
    tasuki_headers.check(result)
    return result


Call = tuple[tuple[Any, ...], Mapping[str, Any]]


class Producer(Protocol):
    """Where a job's enqueues go: the App's producer, or any stand-in a test provides."""

    def enqueue_calls(
        self, job: Job[..., Any], calls: Sequence[Call], bound: Enqueuer[Any] | None = None
    ) -> list[str]: ...

    async def enqueue_calls_async(
        self, job: Job[..., Any], calls: Sequence[Call], bound: Enqueuer[Any] | None = None
    ) -> list[str]: ...

    def result(self, queue: str, message_id: str, timeout: float | None) -> Any: ...

    async def result_async(self, queue: str, message_id: str, timeout: float | None) -> Any: ...

    # `flow` is a `tasuki.core.flows.Flow`, which is built on jobs: named here it would
    # make the two modules import each other.
    def start_flow(self, flow: Any) -> str: ...


class Job(Generic[P, R]):
    """A function the app knows by name, with the options every run of it shares.

    Calling the job object runs the function here and now; `enqueue` runs it on a worker.
    """

    def __init__(
        self,
        producer: Producer,
        fn: Callable[P, R],
        *,
        name: str,
        queue: str,
        retry: Retry,
        timeout: float | None,
        visibility_timeout: float,
        dedup: Dedup | None,
        unique: Unique | None,
        on_exhausted: Callable[[Message, BaseException], Any] | None,
        executor: Executor,
        consumer: bool = False,
        extra: Mapping[str, Any] | None = None,
        priority: int = 0,
        rate_limit: RateLimit | None = None,
        concurrency_limit: ConcurrencyLimit | None = None,
        keep_result: float = 0.0,
    ) -> None:
        self.producer = producer
        self.fn = fn
        self.name = check_job_name(name)
        self.queue = check_queue(queue)
        self.retry = retry
        self.timeout = timeout
        self.visibility_timeout = visibility_timeout
        self.dedup = dedup
        self.unique = unique
        self.on_exhausted = on_exhausted
        self.is_async = inspect.iscoroutinefunction(fn)
        if executor == "auto":
            executor = "async" if self.is_async else "thread"
        if executor == "async" and not self.is_async:
            raise InvalidArgument(f"job {name!r}: executor='async' needs an async def function")
        if executor in ("thread", "process") and self.is_async:
            raise InvalidArgument(f"job {name!r}: an async def job runs on the event loop only")
        self.executor: Executor = executor
        self.consumer = consumer
        # Flow control (`core/admission.py`): the default priority of its messages and
        # the limits they count against.
        self.priority = check_priority(priority)
        self.rate_limit = rate_limit
        self.concurrency_limit = concurrency_limit
        # Seconds the backend keeps each run's JSON return value (`core/results.py`).
        self.keep_result = keep_result
        self.extra: dict[str, Any] = dict(extra or {})
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        self.__qualname__ = getattr(fn, "__qualname__", name)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__wrapped__ = fn
        self._signature: inspect.Signature | None = None
        # (fewest, most) positional arguments when the signature is plain: no *args,
        # **kwargs or keyword-only parameters. Then a call with positional arguments
        # only is checked by counting them, which is most calls.
        self._positional: tuple[int, int] | None = None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Job {self.name} queue={self.queue!r}>"

    def check_arguments(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Refuse at enqueue a call that could only fail on the worker."""
        if self._signature is None:
            try:
                self._signature = inspect.signature(self.fn)
            except (TypeError, ValueError):
                return
            self._positional = _positional_range(self._signature)
        plain = self._positional
        if plain is not None and not kwargs and plain[0] <= len(args) <= plain[1]:
            return
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArgument(f"wrong arguments for job {self.name!r}: {exc}") from exc

    def options(
        self,
        *,
        delay: float | None = None,
        eta: datetime | float | None = None,
        queue: str | None = None,
        message_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        connection: object | None = None,
        priority: int | None = None,
    ) -> Enqueuer[P]:
        """Per-call settings; `message_id` makes the enqueue idempotent.

        `connection`: your own database connection (psycopg for postgresql://, sqlite3
        for sqlite://); the message is written in its open transaction, so it exists
        only if that transaction commits. `priority`: 0 (lowest) to 9 (highest), instead
        of the job's own.
        """
        return Enqueuer(
            self,
            delay=check_delay(delay, eta),
            queue=check_queue(queue) if queue is not None else self.queue,
            message_id=check_message_id(message_id) if message_id is not None else None,
            headers=check_headers(headers),
            connection=connection,
            priority=check_priority(priority) if priority is not None else None,
        )

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return self.producer.enqueue_calls(self, [(args, kwargs)])[0]

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """`enqueue` without blocking the event loop (the backend's call runs on a
        thread), for producers in async code: `await send_mail.enqueue_async(to)`."""
        return (await self.producer.enqueue_calls_async(self, [(args, kwargs)]))[0]

    def enqueue_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[str]:
        """Enqueue one message per item (a tuple of args or a dict of kwargs), in one trip."""
        return self.producer.enqueue_calls(self, [_split_call(c) for c in calls])

    @overload
    def step(self, *args: P.args, **kwargs: P.kwargs) -> Step: ...

    @overload
    def step(self: Job[Concatenate[Any, Q], Any], *args: Q.args, **kwargs: Q.kwargs) -> Step: ...

    def step(self, *args: Any, **kwargs: Any) -> Step:
        """This job as a step of a flow (`tasuki.chain`, `tasuki.group`). In a chain, the
        previous step's result is prepended to `args` when it runs.

        Typed like `enqueue`: a type checker takes the job's whole argument list, or all
        of it but the first parameter (the predecessor's result); anything else fails.
        """
        self.check_step_arguments(args, kwargs)
        return Step(self, args, kwargs)

    def check_step_arguments(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """A step's arguments are checked without its first one when it may take its
        predecessor's result; a call that fits neither way is refused now."""
        try:
            self.check_arguments(args, kwargs)
        except InvalidArgument:
            self.check_arguments((None, *args), kwargs)

    def result(self, message_id: str, timeout: float | None = None) -> R:
        """The return value of the run of `message_id` (on this job's queue), waiting up to
        `timeout` seconds (None: as long as it takes). Raises `JobFailed` if it was
        dead-lettered, `ResultTimeout` if it is not done in time, `ResultMissing` at once
        if no result will come (unknown id, no `keep_result=`, expired)."""
        value: R = self.producer.result(self.queue, message_id, timeout)
        return value

    async def result_async(self, message_id: str, timeout: float | None = None) -> R:
        """`result` without blocking the event loop."""
        value: R = await self.producer.result_async(self.queue, message_id, timeout)
        return value


class Enqueuer(Generic[P]):
    """A job with per-call options bound, from `job.options(...)`."""

    def __init__(
        self,
        job: Job[P, Any],
        *,
        delay: float,
        queue: str,
        message_id: str | None,
        headers: dict[str, str],
        connection: object | None = None,
        priority: int | None = None,
    ) -> None:
        self.job = job
        self.delay = delay
        self.queue = queue
        self.message_id = message_id
        self.headers = headers
        self.connection = connection
        self.priority = priority

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        return self.job.producer.enqueue_calls(self.job, [(args, kwargs)], self)[0]

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """`enqueue` with these options, without blocking the event loop."""
        calls = [(args, kwargs)]
        return (await self.job.producer.enqueue_calls_async(self.job, calls, self))[0]

    @overload
    def step(self, *args: P.args, **kwargs: P.kwargs) -> Step: ...

    @overload
    def step(self: Enqueuer[Concatenate[Any, Q]], *args: Q.args, **kwargs: Q.kwargs) -> Step: ...

    def step(self, *args: Any, **kwargs: Any) -> Step:
        """The job as a flow step with these options (queue, priority, delay, headers);
        typed as `Job.step`."""
        if self.message_id is not None or self.connection is not None:
            raise InvalidArgument(
                "a step's message id derives from its flow's (flow.options(message_id=...)), "
                "and a flow is not enqueued in a caller's transaction: drop message_id= and "
                "connection= from a step's options"
            )
        self.job.check_step_arguments(args, kwargs)
        return Step(
            self.job,
            args,
            kwargs,
            queue=self.queue,
            priority=self.priority,
            delay=self.delay,
            headers=self.headers,
        )

    def enqueue_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[str]:
        items = [_split_call(c) for c in calls]
        if self.message_id is not None and len(items) > 1:
            raise InvalidArgument("one message_id cannot name several messages in enqueue_many")
        return self.job.producer.enqueue_calls(self.job, items, self)


def _positional_range(signature: inspect.Signature) -> tuple[int, int] | None:
    params = signature.parameters.values()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind not in positional for p in params):
        return None
    return sum(1 for p in params if p.default is p.empty), len(params)


def _split_call(call: object) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(call, tuple | list):
        return tuple(call), {}
    if isinstance(call, Mapping):
        return (), dict(call)
    raise InvalidArgument(
        f"enqueue_many takes tuples of arguments or dicts of keyword arguments, got {call!r}"
    )


class Step:
    """One job call inside a flow: `job.step(*args, **kwargs)`, or
    `job.options(queue=..., priority=..., delay=...).step(...)`. Not enqueued by itself:
    put it in a `chain` or a `group`."""

    __slots__ = ("args", "delay", "headers", "job", "kwargs", "priority", "queue")

    def __init__(
        self,
        job: Job[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        queue: str | None = None,
        priority: int | None = None,
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if job.consumer:
            raise InvalidArgument(f"{job.name!r} consumes raw messages: it cannot be a step")
        self.job = job
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.queue = queue if queue is not None else job.queue
        self.priority = job.priority if priority is None else priority
        self.delay = delay
        self.headers = dict(headers or {})

    def __repr__(self) -> str:
        return f"<Step {self.job.name}>"
