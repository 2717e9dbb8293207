"""From a call to stored messages: drafts through the client middleware, then encoded,
size-checked and stored in one backend call.

A delay longer than the backend can hold in one go (SQS: 15 minutes) is carried in hops:
the message is stored with the longest delay the backend allows and a `tasuki-not-before`
header with the real time; a worker that leases it early hands it back, without
penalty, for the next hop (`runtime/receiver.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from tasuki.backends.base import Backend, Enqueued, Envelope, Limit
from tasuki.core import results
from tasuki.core.codec import Codec
from tasuki.core.flowcontrol import lacking, limits_of
from tasuki.core.job import Call, Enqueuer, Job, check_headers, check_message_id, check_queue
from tasuki.core.message import JOB_HEADER, NOT_BEFORE_HEADER, Message, new_id, new_ids
from tasuki.core.outgoing import Outgoing
from tasuki.core.policies import UNSTATED_MAX_ATTEMPTS
from tasuki.errors import ConfigurationError, InvalidArgument, MessageTooLarge
from tasuki.middleware.base import EnqueueNext, MiddlewareChain, build_enqueue

DEFAULT_ID_WINDOW = 3600.0

# The caller's database connection of the enqueue under way (`job.options(connection=)`),
# carried past the client middleware to the backend.
_CONNECTION: ContextVar[object | None] = ContextVar("tasuki_connection", default=None)


class Producer:
    """Turns calls into stored messages for one backend; every job's `enqueue` comes here."""

    def __init__(
        self,
        backend: Backend,
        codec: Codec,
        chain: MiddlewareChain,
        *,
        id_window: float = DEFAULT_ID_WINDOW,
        max_message_size: int | None = None,
        consumer_of: Callable[[str], Job[..., Any] | None] = lambda queue: None,
    ) -> None:
        if id_window < 0:
            raise InvalidArgument(f"id_window must be >= 0 seconds, got {id_window!r}")
        self.backend = backend
        self.codec = codec
        self.chain = chain
        self.id_window = float(id_window)
        limit = backend.capabilities.max_message_size
        self.max_message_size = min(limit, max_message_size) if max_message_size else limit
        self._max_delay = backend.capabilities.max_delay
        self._consumer_of = consumer_of
        self._enqueue_chain: tuple[int, EnqueueNext] | None = None

    def enqueue_calls(
        self, job: Job[..., Any], calls: Sequence[Call], bound: Enqueuer[Any] | None = None
    ) -> list[str]:
        if job.consumer:
            raise InvalidArgument(f"{job.name!r} consumes raw messages: use app.send(queue, body)")
        drafts = []
        given = bound.message_id if bound is not None else None
        if given is not None:
            self._check_ids_supported()
        priority = job.priority if bound is None or bound.priority is None else bound.priority
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
                    priority=priority,
                )
            )
        if bound is not None and bound.connection is not None:
            token = _CONNECTION.set(bound.connection)
            try:
                return [result.id for result in self.enqueue_outgoing(drafts)]
            finally:
                _CONNECTION.reset(token)
        return [result.id for result in self.enqueue_outgoing(drafts)]

    def send(
        self,
        queue: str,
        body: bytes,
        *,
        delay: float,
        headers: Mapping[str, str] | None,
        message_id: str | None,
    ) -> str:
        consumer = self._consumer_of(queue)
        given = check_message_id(message_id) if message_id is not None else None
        if given is not None:
            self._check_ids_supported()
        draft = Outgoing(
            queue=queue,
            id=given or new_id(),
            job=consumer,
            body=body,
            headers=check_headers(headers),
            delay=delay,
            max_attempts=consumer.retry.max_attempts if consumer else UNSTATED_MAX_ATTEMPTS,
            visibility_timeout=consumer.visibility_timeout if consumer else None,
            keep_id=self.id_window if given else 0.0,
            id_given=given is not None,
            priority=consumer.priority if consumer else 0,
        )
        return self.enqueue_outgoing([draft])[0].id

    def enqueue_outgoing(self, drafts: list[Outgoing]) -> list[Enqueued]:
        """Run drafts through the client middleware, then store them in one backend call."""
        cached = self._enqueue_chain
        if cached is None or cached[0] != self.chain.version:
            cached = self._enqueue_chain = (
                self.chain.version,
                build_enqueue(self.chain, self._store),
            )
        return cached[1](drafts)

    # -- results (`core/results.py`) ----------------------------------------------------
    def result(self, queue: str, message_id: str, timeout: float | None) -> Any:
        self._check_results()
        return results.wait(self.backend, check_queue(queue), message_id, timeout)

    async def result_async(self, queue: str, message_id: str, timeout: float | None) -> Any:
        self._check_results()
        return await results.wait_async(self.backend, check_queue(queue), message_id, timeout)

    def _check_results(self) -> None:
        if not self.backend.capabilities.results:
            scheme = self.backend.url.split("://", 1)[0]
            raise ConfigurationError(lacking("a job's result", "results", scheme))

    def _check_ids_supported(self) -> None:
        if not self.backend.capabilities.id_window:
            raise ConfigurationError(
                f"{self.backend.url}: caller-given message ids need the backend capability "
                "'id_window' (idempotent enqueue), which this backend lacks; give it a lock "
                "store (locks=...) or enqueue without message_id"
            )

    def _store(self, drafts: list[Outgoing]) -> list[Enqueued]:
        if not self.backend.capabilities.priorities and any(d.priority for d in drafts):
            scheme = self.backend.url.split("://", 1)[0]
            raise ConfigurationError(lacking("priority=", "priorities", scheme))
        envelopes = [self._envelope(d) for d in drafts]
        if not envelopes:
            return []
        connection = _CONNECTION.get()
        if connection is not None:
            return self.backend.enqueue(envelopes, connection)
        return self.backend.enqueue(envelopes)

    def _envelope(self, d: Outgoing) -> Envelope:
        codec = self.codec
        headers = d.headers  # the draft's own dict: copied only if something is added
        delay = d.delay
        if self._max_delay is not None and delay > self._max_delay:
            headers = {**headers, NOT_BEFORE_HEADER: repr(time.time() + delay)}
            delay = self._max_delay
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
            delay,
            d.max_attempts,
            d.visibility_timeout,
            d.keep_id,
            d.unique,
            priority=d.priority,
            limits=_limits(d, body, headers),
            keep_result=d.job.keep_result if d.job is not None else 0.0,
        )


def _limits(d: Outgoing, body: bytes, headers: Mapping[str, str]) -> tuple[Limit, ...]:
    """The limits the message counts against, keyed from it as the worker will see it."""
    job = d.job
    if job is None or (job.rate_limit is None and job.concurrency_limit is None):
        return ()
    message = Message(
        id=d.id,
        queue=d.queue,
        body=body,
        headers=headers,
        job=None if job.consumer else job.name,
        args=d.args,
        kwargs=d.kwargs,
    )
    return limits_of(job, message)
