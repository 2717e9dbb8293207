"""Trace context: the W3C `traceparent` of the enqueuing code travels with the message.

On enqueue, the `traceparent` (and `tracestate`) of the code that enqueues go into the
message's headers: from the current OpenTelemetry span when `opentelemetry-api` is
installed (extra `tasuki[otel]`), else from the job being run, if its own message
carried one, so a chain of jobs stays one trace. Headers the caller set are kept.

With OpenTelemetry, enqueue is a PRODUCER span (`send <queue>`, one per enqueue call,
whose context is what the messages carry) and every run of a message is a CONSUMER span
(`process <queue>`), a child of the enqueuing context and linked to it, with the queue,
job, message id, attempt and outcome as attributes, current while the job runs (so
spans the job makes, and messages it enqueues, belong to it). Spans are made only when
a tracer provider is set up (`opentelemetry.trace.set_tracer_provider`, before the
worker starts, or `TraceContext(tracer_provider=...)`); otherwise runs pay nothing and
only the headers are carried.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from tasuki.core.context import get_current
from tasuki.middleware.base import EnqueueNext, ExecuteHook, Middleware, Outgoing

if TYPE_CHECKING:
    from tasuki.core.context import Context
    from tasuki.core.job import Job
    from tasuki.core.records import Enqueued

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
SYSTEM = "tasuki"

_otel: Any = None
_looked = False


def _opentelemetry() -> Any:
    """The OpenTelemetry API modules, or None when it is not installed (looked up once)."""
    global _otel, _looked
    if not _looked:
        try:
            from opentelemetry import context, propagate, trace

            _otel = (trace, propagate, context)
        except ImportError:
            _otel = None
        _looked = True
    return _otel


class TraceContext(Middleware):
    """Carries `traceparent` in headers; spans for enqueue and runs with OpenTelemetry."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self._provider = tracer_provider
        self._tracer: Any = None

    def _active(self) -> Any:
        """The OpenTelemetry modules when spans are to be made (a provider is set up)."""
        otel = _opentelemetry()
        if otel is None:
            return None
        if self._provider is not None:
            return otel
        configured = not isinstance(otel[0].get_tracer_provider(), otel[0].ProxyTracerProvider)
        return otel if configured else None

    def _get_tracer(self, trace: Any) -> Any:
        if self._tracer is None:
            from importlib.metadata import version  # the package's, not `tasuki` above us

            self._tracer = trace.get_tracer("tasuki", version("tasuki"), self._provider)
        return self._tracer

    # -- producer ----------------------------------------------------------------------
    def enqueue(self, messages: list[Outgoing], call_next: EnqueueNext) -> list[Enqueued]:
        otel = self._active()
        if otel is None:
            _carry_from_current_job(messages)
            return call_next(messages)
        trace, propagate, _ = otel
        queues = sorted({m.queue for m in messages})
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.destination.name": ",".join(queues),
        }
        if len(messages) == 1:
            attributes["messaging.message.id"] = messages[0].id
            if messages[0].job is not None:
                attributes["tasuki.core.job"] = messages[0].job.name
        else:
            attributes["messaging.batch.message_count"] = len(messages)
        tracer = self._get_tracer(trace)
        with tracer.start_as_current_span(
            f"send {attributes['messaging.destination.name']}",
            kind=trace.SpanKind.PRODUCER,
            attributes=attributes,
        ) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            if TRACEPARENT in carrier:
                for m in messages:
                    if TRACEPARENT not in m.headers:
                        m.headers.update(carrier)
            else:  # a provider that does not sample: keep a running job's own context
                _carry_from_current_job(messages)
            results = call_next(messages)
            if len(results) == 1:
                span.set_attribute("tasuki.enqueue.status", results[0].status)
            return results

    # -- consumer ----------------------------------------------------------------------
    def applies_to(self, job: Job[..., Any]) -> bool:
        return self._active() is not None

    def execute(self, ctx: Context) -> ExecuteHook:
        trace, propagate, context = _opentelemetry()
        m = ctx.message
        headers = m.headers
        parent = None
        links = []
        if TRACEPARENT in headers:
            parent = propagate.extract(
                {k: headers[k] for k in (TRACEPARENT, TRACESTATE) if k in headers}
            )
            linked = trace.get_current_span(parent).get_span_context()
            if linked.is_valid:
                links.append(trace.Link(linked))
        job = m.job or (ctx.job.name if ctx.job is not None else "-")
        span = self._get_tracer(trace).start_span(
            f"process {m.queue}",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            links=links,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "process",
                "messaging.destination.name": m.queue,
                "messaging.message.id": m.id,
                "tasuki.core.job": job,
                "tasuki.attempt": m.attempt,
            },
        )
        token = context.attach(trace.set_span_in_context(span))
        thread = threading.get_ident()
        try:
            outcome = yield
        finally:
            # The way out runs in the job's thread, except when a stuck job is given up
            # on after its timeout: a context is detached only where it was attached.
            if threading.get_ident() == thread:
                context.detach(token)
        action = outcome.action or ("ack" if outcome.error is None else "retry")
        span.set_attribute("tasuki.outcome", action)
        if outcome.error is not None:
            span.record_exception(outcome.error)
            if action == "dead":
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(outcome.error)))
        span.end()


def _carry_from_current_job(messages: list[Outgoing]) -> None:
    """Inside a job whose message carried a trace context, pass it on."""
    ctx = get_current()
    if ctx is None:
        return
    parent = ctx.message.headers
    if TRACEPARENT not in parent:
        return
    carried = {k: parent[k] for k in (TRACEPARENT, TRACESTATE) if k in parent}
    for m in messages:
        if TRACEPARENT not in m.headers:
            m.headers.update(carried)
