"""The Sentry integration with sentry-sdk itself and a transport that keeps what it would
send (no network): one event per failed attempt, or per dead letter, tagged with the
queue, job, message id, attempt and trace id, and no second event from the logging
integration for the same failure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import tasuki
from tasuki.core.message import JOB_HEADER
from tests.support.deps import need

sentry_sdk = need("sentry_sdk")
from sentry_sdk.integrations.dedupe import DedupeIntegration  # noqa: E402
from sentry_sdk.integrations.logging import LoggingIntegration  # noqa: E402
from sentry_sdk.transport import Transport  # noqa: E402

from tasuki.middleware import SentryErrors  # noqa: E402
from tasuki.middleware.sentry import trace_id  # noqa: E402

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


class Captured(Transport):
    """Keeps every envelope instead of sending it."""

    def __init__(self) -> None:
        super().__init__({"dsn": "https://public@sentry.invalid/1"})
        self.envelopes: list[Any] = []

    def capture_envelope(self, envelope: Any) -> None:
        self.envelopes.append(envelope)

    def events(self) -> list[dict[str, Any]]:
        return [
            orjson.loads(item.payload.get_bytes())
            for envelope in self.envelopes
            for item in envelope.items
            if item.type == "event"
        ]


@pytest.fixture
def sent() -> Iterator[Captured]:
    transport = Captured()
    # The logging integration as sentry-sdk sets it up by default (events from ERROR).
    sentry_sdk.init(
        dsn="https://public@sentry.invalid/1",
        transport=transport,
        default_integrations=False,
        integrations=[LoggingIntegration(), DedupeIntegration()],
    )
    yield transport
    sentry_sdk.get_client().close()
    sentry_sdk.init()  # a client without a DSN: nothing is sent by the tests after this


def run_app(url: str, reporter: SentryErrors) -> tasuki.App:
    app = tasuki.App(url)
    app.middleware.insert_before("Logging", reporter)

    @app.job(retry=tasuki.Retry(max_attempts=5, backoff=tasuki.constant(0.0)))
    def flaky(n: int) -> None:
        if tasuki.current().attempt < 3:
            raise ConnectionError(f"upload {n}: connection reset")

    @app.job(retry=tasuki.Retry(max_attempts=2, backoff=tasuki.constant(0.0)))
    def doomed(n: int) -> None:
        raise RuntimeError(f"card {n} declined")

    @app.job()
    def fine() -> None:
        pass

    flaky.enqueue(1)
    app.send(
        "default",
        orjson.dumps({"args": [7], "kwargs": {}}),
        headers={JOB_HEADER: "doomed", "traceparent": TRACEPARENT},
        message_id="order-7",
    )
    fine.enqueue()
    app.send("default", b'{"args": [], "kwargs": {}}', headers={JOB_HEADER: "no_such_job"})
    app.worker(concurrency=2).run(until_idle=True, timeout=60)
    return app


def by_tags(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if "tasuki.job" in e.get("tags", {})]


def test_one_event_per_failed_attempt(sent: Captured, sqlite_url: str) -> None:
    app = run_app(sqlite_url, SentryErrors())
    events = sent.events()
    runs = by_tags(events)
    assert sorted((e["tags"]["tasuki.job"], e["tags"]["tasuki.attempt"]) for e in runs) == [
        ("doomed", "1"),
        ("doomed", "2"),
        ("flaky", "1"),
        ("flaky", "2"),
    ]
    last = next(e for e in runs if e["tags"]["tasuki.outcome"] == "dead")
    assert last["level"] == "error"
    assert last["tags"] == {
        "tasuki.queue": "default",
        "tasuki.job": "doomed",
        "tasuki.message_id": "order-7",
        "tasuki.attempt": "2",
        "tasuki.outcome": "dead",
        "trace_id": TRACE,
    }
    [exc] = last["exception"]["values"]
    assert (exc["type"], exc["value"]) == ("RuntimeError", "card 7 declined")
    assert any(f["function"] == "doomed" for f in exc["stacktrace"]["frames"])
    assert last["contexts"]["tasuki"]["reason"] == "retries exhausted after 2 attempts"
    assert last["contexts"]["tasuki"]["max_attempts"] == 2
    retried = [e for e in runs if e["tags"]["tasuki.outcome"] == "retry"]
    assert len(retried) == 3 and all(e["level"] == "warning" for e in retried)
    assert all("trace_id" not in e["tags"] for e in runs if e["tags"]["tasuki.job"] == "flaky")
    # The worker's own "dead-lettered" line of a failed run is not a second event; the
    # poison message's (it never ran, so no middleware saw it) still reaches Sentry.
    logged = [e for e in events if e.get("logger") == "tasuki"]
    # One template for every dead letter (one Sentry issue), the facts in the text.
    assert [e["logentry"]["message"] for e in logged] == ["dead-lettered %s"], logged
    assert logged[0]["logentry"]["formatted"].startswith("dead-lettered queue=default job=")
    assert logged[0]["extra"]["tasuki"]["job"] == "no_such_job"
    assert len(events) == len(runs) + 1
    app.close()


def test_one_event_per_dead_letter(sent: Captured, sqlite_url: str) -> None:
    app = run_app(sqlite_url, SentryErrors(only_final=True))
    runs = by_tags(sent.events())
    assert [(e["tags"]["tasuki.job"], e["tags"]["tasuki.outcome"]) for e in runs] == [
        ("doomed", "dead")
    ]
    assert runs[0]["tags"]["trace_id"] == TRACE
    assert app.stats()["dead"] == 2  # doomed, and the poison message
    app.close()


def test_trace_id_reads_only_valid_traceparents() -> None:
    assert trace_id({"traceparent": TRACEPARENT}) == TRACE
    assert trace_id({"traceparent": TRACEPARENT.upper()}) == TRACE
    assert trace_id({}) is None
    assert trace_id({"traceparent": "garbage"}) is None
    assert trace_id({"traceparent": f"00-{'0' * 32}-00f067aa0ba902b7-01"}) is None
