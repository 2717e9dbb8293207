"""From a call to stored messages: drafts through the client middleware, then encoded,
size-checked and stored in one backend call.

A delay longer than the backend can hold in one go (SQS: 15 minutes) is carried in hops:
the message is stored with the longest delay the backend allows and a `tasuki-not-before`
header with the real time; a worker that leases it early hands it back, without
penalty, for the next hop (`runtime/receiver.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from tasuki.backends.base import Backend, Enqueued, Envelope
from tasuki.core import flows, results
from tasuki.core.capabilities import DROP_IT
from tasuki.core.codec import Codec
from tasuki.core.flows import Flow
from tasuki.core.job import Call, Enqueuer, Job, check_headers, check_message_id, check_queue
from tasuki.core.message import JOB_HEADER, new_id, new_ids
from tasuki.core.outgoing import Outgoing, Sealer
from tasuki.core.policies import UNSTATED_MAX_ATTEMPTS
from tasuki.errors import InvalidArgument
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
        self.sealer = Sealer(codec, self.max_message_size, backend.capabilities.max_delay)
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
                    made_id="" if given is not None else message_id,
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

    async def enqueue_calls_async(
        self, job: Job[..., Any], calls: Sequence[Call], bound: Enqueuer[Any] | None = None
    ) -> list[str]:
        """`enqueue_calls` on a thread: the backends' clients are blocking ones, and the
        context goes along (a trace's span). In a caller's transaction (`connection=`)
        it runs here: a connection belongs to its thread (sqlite3 refuses any other)."""
        if bound is not None and bound.connection is not None:
            return self.enqueue_calls(job, calls, bound)
        return await asyncio.to_thread(self.enqueue_calls, job, calls, bound)

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
        made = "" if given is not None else new_id()
        draft = Outgoing(
            queue=queue,
            id=given or made,
            job=consumer,
            body=body,
            headers=check_headers(headers),
            delay=delay,
            max_attempts=consumer.retry.max_attempts if consumer else UNSTATED_MAX_ATTEMPTS,
            visibility_timeout=consumer.visibility_timeout if consumer else None,
            keep_id=self.id_window if given else 0.0,
            made_id=made,
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

    # -- workflows (`core/flows.py`) -----------------------------------------------------
    def start_flow(self, flow: Flow) -> str:
        """Work out the flow's plan, then store its record and its first steps at once;
        an id already started starts nothing."""
        self.check_workflows()
        flow_id = flow.message_id or new_id()
        worked = flows.plan(flow, flow_id)
        on_failure = worked.record.extra.get("on_failure")
        drafts = [
            flows.draft(spec, step.job, flow_id, worked.record.retention, on_failure)
            for spec, step in worked.entries
        ]
        if any(d.priority for d in drafts):
            self.backend.require("priorities", "enqueue with priority=", DROP_IT)
        self.backend.start_flow(worked.record, self.seal(drafts))
        return flow_id

    def check_workflows(self) -> None:
        self.backend.require("workflows", "run a workflow (chain, group)")

    # -- results (`core/results.py`) ----------------------------------------------------
    def result(self, queue: str, message_id: str, timeout: float | None) -> Any:
        self._check_results()
        return results.wait(self.backend, check_queue(queue), message_id, timeout)

    async def result_async(self, queue: str, message_id: str, timeout: float | None) -> Any:
        self._check_results()
        return await results.wait_async(self.backend, check_queue(queue), message_id, timeout)

    def _check_results(self) -> None:
        self.backend.require("results", "keep a job's result")

    def _check_ids_supported(self) -> None:
        self.backend.require(
            "id_window",
            "enqueue with a caller-given message id (idempotent enqueue)",
            "give it a lock store (locks=...) or enqueue without message_id",
        )

    def _store(self, drafts: list[Outgoing]) -> list[Enqueued]:
        if any(d.priority for d in drafts):
            self.backend.require("priorities", "enqueue with priority=", DROP_IT)
        envelopes = [self._envelope(d) for d in drafts]
        if not envelopes:
            return []
        connection = _CONNECTION.get()
        if connection is not None:
            return self.backend.enqueue(envelopes, connection)
        return self.backend.enqueue(envelopes)

    def _envelope(self, d: Outgoing) -> Envelope:
        return self.sealer.seal(d)

    def seal(self, drafts: Sequence[Outgoing]) -> list[Envelope]:
        """Drafts sealed as they would be stored, without the client middleware: what a
        flow's steps are (their successors are sealed by the worker the same way)."""
        seal = self.sealer.seal
        return [seal(d) for d in drafts]
