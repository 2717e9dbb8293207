"""Trace context: `traceparent` in headers, and OpenTelemetry spans for enqueue and runs,
checked with the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tasuki
from tasuki.middleware import TraceContext


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def traced_app(provider: TracerProvider | None) -> tasuki.App:
    app = tasuki.App("memory://")
    app.middleware.remove(TraceContext)
    app.middleware.insert_before("Logging", TraceContext(tracer_provider=provider))
    return app


def _traceparent(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


def test_enqueue_and_each_attempt_are_linked_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    app = traced_app(provider)
    calls = []
    carried = []

    @app.job(queue="t", retry=tasuki.Retry(max_attempts=3, backoff=tasuki.constant(0.0)))
    def flaky(n: int) -> None:
        calls.append(n)
        carried.append(tasuki.current().message.headers["traceparent"])
        if len(calls) == 1:
            raise ValueError("first time")

    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("handle request") as request:
        message_id = flaky.enqueue(7)
    app.worker(queues="t", concurrency=1).run(until_idle=True, timeout=30)
    assert calls == [7, 7]

    spans = {s.name: s for s in exporter.get_finished_spans() if s.name != "process t"}
    runs = [s for s in exporter.get_finished_spans() if s.name == "process t"]
    send = spans["send t"]
    assert send.kind == trace.SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert send.attributes is not None
    assert send.attributes["messaging.message.id"] == message_id
    assert send.attributes["tasuki.core.job"] == "flaky"
    assert send.attributes["tasuki.enqueue.status"] == "enqueued"

    assert [r.attributes and r.attributes["tasuki.attempt"] for r in runs] == [1, 2]
    assert [r.attributes and r.attributes["tasuki.outcome"] for r in runs] == ["retry", "ack"]
    send_ctx = send.get_span_context()
    assert send_ctx is not None
    for run in runs:
        assert run.kind == trace.SpanKind.CONSUMER
        assert run.attributes is not None
        assert run.attributes["messaging.destination.name"] == "t"
        assert run.attributes["messaging.message.id"] == message_id
        assert run.attributes["tasuki.core.job"] == "flaky"
        assert run.parent is not None and run.parent.span_id == send_ctx.span_id
        assert [link.context.span_id for link in run.links] == [send_ctx.span_id]
        ctx = run.get_span_context()
        assert ctx is not None and ctx.trace_id == send_ctx.trace_id
    failed = runs[0]
    assert [e.name for e in failed.events] == ["exception"]
    assert failed.events[0].attributes is not None
    assert failed.events[0].attributes["exception.type"] == "ValueError"

    # The headers carry the producer span's context, on every attempt.
    assert carried == [_traceparent(send)] * 2
    app.close()


def test_a_job_that_enqueues_continues_the_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    app = traced_app(provider)
    seen: dict[str, str] = {}

    @app.job(queue="t")
    def second() -> None:
        seen["second"] = tasuki.current().message.headers["traceparent"]

    @app.job(queue="t")
    def first() -> None:
        with provider.get_tracer("test").start_as_current_span("inside the job"):
            second.enqueue()

    first.enqueue()
    app.worker(queues="t", concurrency=1).run(until_idle=True, timeout=30)
    spans = exporter.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    first_run, second_run = by_name["process t"]
    inside = by_name["inside the job"][0]
    send_second = by_name["send t"][1]
    first_ctx = first_run.get_span_context()
    assert first_ctx is not None
    # one trace: first run -> span inside it -> send of the second -> second run
    assert inside.parent is not None and inside.parent.span_id == first_ctx.span_id
    assert send_second.parent is not None
    assert send_second.parent.span_id == inside.get_span_context().span_id  # type: ignore[union-attr]
    assert seen["second"] == _traceparent(send_second)
    assert second_run.parent is not None
    assert second_run.parent.span_id == send_second.get_span_context().span_id  # type: ignore[union-attr]
    assert {s.get_span_context().trace_id for s in spans} == {first_ctx.trace_id}  # type: ignore[union-attr]
    app.close()


def test_without_an_sdk_a_given_traceparent_is_carried_on() -> None:
    app = traced_app(None)  # the API's global provider: a no-op unless an SDK is set up
    given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    seen: dict[str, str] = {}

    @app.job(queue="t")
    def child() -> None:
        seen["child"] = tasuki.current().message.headers["traceparent"]

    @app.consumer(queue="in")
    def handle(message: tasuki.Message) -> None:
        child.enqueue()

    app.send("in", b"{}", headers={"traceparent": given, "tracestate": "k=v"})
    app.worker(queues=["in", "t"], concurrency=2).run(until_idle=True, timeout=30)
    assert seen["child"] == given
    app.close()
